// SPDX-License-Identifier: MIT
#include "weft/fabric/event_queue.hpp"
#include "check.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {

struct EventQueue::Private {};

EventQueue::EventQueue(Private, std::shared_ptr<Fabric> fabric, detail::FidPtr<fid_eq> fid)
    : fabric_(std::move(fabric)), fid_(std::move(fid))
{
}

std::shared_ptr<EventQueue> EventQueue::open(std::shared_ptr<Fabric> fabric, bool sleepable)
{
    fi_eq_attr attr{};
    attr.size = 64;
    attr.wait_obj = sleepable ? FI_WAIT_FD : FI_WAIT_UNSPEC;
    fid_eq* raw = nullptr;
    detail::check(fi_eq_open(fabric->get(), &attr, &raw, nullptr), "fi_eq_open",
                  fabric->provider());
    auto eq = std::make_shared<EventQueue>(Private{}, std::move(fabric), detail::FidPtr<fid_eq>(raw));
    if (sleepable)
        detail::check(fi_control(&raw->fid, FI_GETWAIT, &eq->fd_), "fi_control(FI_GETWAIT)",
                      eq->fabric_->provider());
    return eq;
}

std::string_view event_name(std::uint32_t type) noexcept
{
    switch (type) {
    case FI_CONNREQ: return "FI_CONNREQ";
    case FI_CONNECTED: return "FI_CONNECTED";
    case FI_SHUTDOWN: return "FI_SHUTDOWN";
    case FI_NOTIFY: return "FI_NOTIFY";
    case FI_MR_COMPLETE: return "FI_MR_COMPLETE";
    case FI_AV_COMPLETE: return "FI_AV_COMPLETE";
    case FI_JOIN_COMPLETE: return "FI_JOIN_COMPLETE";
    default: return "unknown event";
    }
}

EventQueue::Event EventQueue::wait(Deadline deadline, std::string_view waiting_for)
{
    const bool late = deadline.expired();
    for (;;) {
        if (auto ev = next(std::clamp(deadline.remaining_ms(), 0, 100), waiting_for))
            return std::move(*ev);
        if (deadline.expired())
            detail::throw_error(
                "fi_eq_sread", -FI_ETIMEDOUT, fabric_->provider(),
                late ? fmt::format("the deadline had already passed when the wait for {} began: "
                                   "nothing is known to be wrong with the peer. Give the call a "
                                   "deadline in the future (Deadline::after, or Deadline::never())",
                                   waiting_for)
                     : fmt::format("no {} before the deadline: is the peer up, reachable, and "
                                   "using the same provider?",
                                   waiting_for));
    }
}

std::optional<EventQueue::Event> EventQueue::read(std::string_view waiting_for)
{
    return next(0, waiting_for);
}

std::optional<EventQueue::Event> EventQueue::read_any()
{
    return next(0, "an event", true);
}

std::optional<EventQueue::Event> EventQueue::next(int timeout_ms, std::string_view waiting_for,
                                                  bool errors_as_events)
{
    const auto prov = fabric_->provider();
    alignas(fi_eq_cm_entry) std::array<std::byte, sizeof(fi_eq_cm_entry) + 512> buf{};
    std::uint32_t type = 0;
    const ssize_t r = timeout_ms > 0
                          ? fi_eq_sread(fid_.get(), &type, buf.data(), buf.size(), timeout_ms, 0)
                          : fi_eq_read(fid_.get(), &type, buf.data(), buf.size(), 0);
    if (r >= 0) {
        fi_eq_cm_entry entry{};
        std::memcpy(&entry, buf.data(), std::min(sizeof entry, static_cast<std::size_t>(r)));
        Event ev;
        ev.type = type;
        ev.fid = entry.fid;
        if (entry.info)
            ev.info.emplace(entry.info); // we own it now
        if (static_cast<std::size_t>(r) > sizeof entry)
            ev.data.assign(buf.begin() + sizeof entry, buf.begin() + r);
        return ev;
    }
    if (r == -FI_EAGAIN || r == -FI_ETIMEDOUT)
        return std::nullopt;
    if (r == -FI_EAVAIL) {
        fi_eq_err_entry err{};
        const ssize_t er = fi_eq_readerr(fid_.get(), &err, 0);
        if (er < 0)
            detail::throw_error("fi_eq_readerr", static_cast<int>(er), prov);
        std::array<char, 256> text{};
        const char* prov_text =
            fi_eq_strerror(fid_.get(), err.prov_errno, err.err_data, text.data(), text.size());
        const int code = err.err ? -err.err : -FI_EOTHER;
        if (errors_as_events) {
            Event ev;
            ev.fid = err.fid;
            ev.error = code;
            ev.error_text = prov_text ? prov_text : "";
            return ev;
        }
        std::string hint = fmt::format("while waiting for {}: provider says \"{}\"", waiting_for,
                                       prov_text ? prov_text : "");
        if (code == -FI_ECONNREFUSED)
            hint += "; nothing listens at the peer's fabric address (server not started, "
                    "wrong address, or a firewall)";
        detail::throw_error("connection", code, prov, hint);
    }
    detail::throw_error(timeout_ms > 0 ? "fi_eq_sread" : "fi_eq_read", static_cast<int>(r), prov,
                        fmt::format("while waiting for {}", waiting_for));
}

} // namespace weft
