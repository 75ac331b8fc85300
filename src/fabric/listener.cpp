// SPDX-License-Identifier: MIT
#include "weft/fabric/listener.hpp"
#include "check.hpp"

#include <algorithm>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "retry.hpp"
#include "weft/base/error.hpp"

namespace weft {

struct Listener::Private {};

Listener::Listener(Private, std::shared_ptr<Fabric> fabric, std::shared_ptr<EventQueue> eq,
                   Info info)
    : fabric_(std::move(fabric)), eq_(std::move(eq)), info_(std::move(info))
{
    fid_pep* raw = nullptr;
    detail::check(fi_passive_ep(fabric_->get(), info_.get(), &raw, nullptr), "fi_passive_ep",
                  info_.provider());
    fid_.reset(raw);
    detail::check(fi_pep_bind(raw, &eq_->get()->fid, 0), "fi_pep_bind", info_.provider());
    detail::check(fi_listen(raw), "fi_listen", info_.provider(),
                  "is the address already in use, or not local?");
}

std::shared_ptr<Listener> Listener::open(std::shared_ptr<Fabric> fabric, const Info& info)
{
    return detail::retry_on_port_clash(info.get(), [&] {
        auto eq = EventQueue::open(fabric);
        return std::make_shared<Listener>(Private{}, fabric, std::move(eq), info);
    });
}

std::shared_ptr<Listener> Listener::open(std::shared_ptr<Fabric> fabric, const Info& info,
                                         std::shared_ptr<EventQueue> eq)
{
    return detail::retry_on_port_clash(info.get(), [&] {
        return std::make_shared<Listener>(Private{}, fabric, eq, info);
    });
}

std::vector<std::byte> Listener::name() const
{
    std::vector<std::byte> out(256);
    std::size_t len = out.size();
    detail::check(fi_getname(&fid_->fid, out.data(), &len), "fi_getname", fabric_->provider());
    out.resize(len);
    return out;
}

std::shared_ptr<Endpoint> Listener::accept(const std::shared_ptr<Domain>& domain,
                                           const Options& options,
                                           std::span<const std::byte> token, Deadline deadline)
{
    return Endpoint::accept(domain, wait_request(token, deadline), options, deadline);
}

std::optional<EventQueue::Event> Listener::poll_request()
{
    while (auto ev = eq_->read("a connection request (FI_CONNREQ)"))
        if (ev->type == FI_CONNREQ && ev->info)
            return ev;
    return std::nullopt;
}

void Listener::reject(const EventQueue::Event& request) noexcept
{
    if (request.info)
        (void)fi_reject(fid_.get(), request.info->get()->handle, nullptr, 0);
}

EventQueue::Event Listener::wait_request(std::span<const std::byte> token, Deadline deadline)
{
    for (;;) {
        auto ev = eq_->wait(deadline, "a connection request (FI_CONNREQ)");
        if (ev.type != FI_CONNREQ || !ev.info)
            continue; // stale events of rejected requests
        // Connection data may be padded by the provider: compare the prefix.
        const bool match = token.empty() ||
                           (ev.data.size() >= token.size() &&
                            std::equal(token.begin(), token.end(), ev.data.begin()));
        if (!match) {
            reject(ev);
            continue;
        }
        return ev;
    }
}

} // namespace weft
