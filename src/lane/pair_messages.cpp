// SPDX-License-Identifier: MIT
// A Pair's notifications and messages (pair.hpp): records on the peer's ring,
// a message longer than one record in parts, all or nothing, and this side's
// inbox read back into whole notifications and messages.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "pair.hpp"
#include "weft/base/error.hpp"

namespace weft::lane {

bool Pair::notify(std::uint32_t value)
{
    std::array<std::byte, 4> b{};
    std::memcpy(b.data(), &value, 4);
    return outbox_->push(static_cast<std::uint16_t>(RecordKind::notify), b);
}

bool Pair::note(std::uint32_t value, std::span<const std::byte> payload)
{
    using L = RingLayout;
    if (payload.size() > L::max_payload - 4)
        throw UsageError("lane", -EMSGSIZE, "",
                         fmt::format("a note's {} B payload: the lane carries up to {} B",
                                     payload.size(), L::max_payload - 4));
    std::array<std::byte, L::max_payload> b{};
    std::memcpy(b.data(), &value, 4);
    if (!payload.empty())
        std::memcpy(b.data() + 4, payload.data(), payload.size());
    return outbox_->push(static_cast<std::uint16_t>(RecordKind::note),
                         std::span(b).first(4 + payload.size()));
}

bool Pair::send(std::span<const std::byte> message)
{
    using L = RingLayout;
    if (message.size() <= L::max_payload)
        return outbox_->push(static_cast<std::uint16_t>(RecordKind::message), message);
    // In parts, all or nothing: the room for every part first.
    const std::size_t first = L::max_payload - 4;
    const std::size_t rest = message.size() - first;
    const std::size_t whole_records = rest / L::max_payload;
    const std::size_t tail = rest % L::max_payload;
    const auto slots_for = [](std::size_t n) {
        return n <= L::first_payload ? 1 : 1 + (n - L::first_payload + L::line - 1) / L::line;
    };
    const std::size_t needed = slots_for(L::max_payload) * (1 + whole_records) +
                               (tail > 0 ? slots_for(tail) : 0);
    if (needed > outbox_->slots())
        throw UsageError("lane", -EMSGSIZE, "",
                         fmt::format("a {} B message never fits the peer's ring of {} KiB: the "
                                     "peer's Options::slot_size is smaller than this side's",
                                     message.size(), outbox_->slots() * L::line / 1024));
    if (outbox_->room() < needed)
        return false;
    std::array<std::byte, L::max_payload> head{};
    const auto total = static_cast<std::uint32_t>(message.size());
    std::memcpy(head.data(), &total, 4);
    std::memcpy(head.data() + 4, message.data(), first);
    (void)outbox_->push(static_cast<std::uint16_t>(RecordKind::message_first), head);
    for (std::size_t at = first; at < message.size(); at += L::max_payload)
        (void)outbox_->push(static_cast<std::uint16_t>(RecordKind::message_more),
                            message.subspan(at, std::min(L::max_payload, message.size() - at)));
    return true;
}

std::optional<RingRecord> Pair::receive(std::span<std::byte> out)
{
    using L = RingLayout;
    std::array<std::byte, L::max_payload> part;
    for (;;) {
        const auto rec = inbox_.pop(part);
        if (!rec)
            return std::nullopt;
        const auto kind = static_cast<RecordKind>(rec->kind);
        const auto got = std::span<const std::byte>(part).first(rec->length);
        const bool in_parts = partial_total_ > 0;
        if (!in_parts && kind == RecordKind::notify && rec->length == 4) {
            std::memcpy(out.data(), got.data(), 4);
            return rec;
        }
        if (!in_parts && (kind == RecordKind::message ||
                          (kind == RecordKind::note && rec->length >= 4))) {
            if (rec->length > out.size())
                throw Error("lane", -EMSGSIZE, "",
                            fmt::format("pid {} sent a {} B message, over this side's {} B",
                                        peer_.pid, rec->length, out.size()));
            std::memcpy(out.data(), got.data(), got.size());
            return rec;
        }
        if (!in_parts && kind == RecordKind::message_first && rec->length == L::max_payload) {
            std::uint32_t total = 0;
            std::memcpy(&total, got.data(), 4);
            if (total <= L::max_payload || total > out.size())
                throw Error("lane", -EMSGSIZE, "",
                            fmt::format("pid {} began a {} B message in parts, for a {} B buffer",
                                        peer_.pid, total, out.size()));
            partial_total_ = total;
            partial_.assign(got.begin() + 4, got.end());
            continue;
        }
        if (in_parts && kind == RecordKind::message_more && rec->length > 0 &&
            rec->length <= partial_total_ - partial_.size()) {
            partial_.insert(partial_.end(), got.begin(), got.end());
            if (partial_.size() < partial_total_)
                continue;
            std::memcpy(out.data(), partial_.data(), partial_.size()); // total <= out.size()
            const RingRecord whole{static_cast<std::uint16_t>(RecordKind::message), partial_.size()};
            partial_.clear();
            partial_total_ = 0;
            return whole;
        }
        throw Error("lane", -EPROTO, "",
                    fmt::format("pid {} sent a record of kind {} ({} B) out of protocol",
                                peer_.pid, rec->kind, rec->length));
    }
}

} // namespace weft::lane
