// SPDX-License-Identifier: MIT
// The lane's inbox side (detail::Lanes, lanes.hpp): records from the peers'
// rings as completions, read with the Node's queue, and the message buffers
// they are lent in.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "lanes.hpp"

namespace weft::detail {

std::uint32_t Lanes::free_buffer()
{
    if (free_buffers_.empty()) {
        const auto index = static_cast<std::uint32_t>(buffers_.size());
        auto b = std::make_unique<Buffer>();
        b->bytes.resize(std::max<std::size_t>(max_message_, 4));
        b->tag = detail::Tag{nullptr, index, detail::Tag::Kind::side};
        buffers_.push_back(std::move(b));
        return index;
    }
    const std::uint32_t index = free_buffers_.back();
    free_buffers_.pop_back();
    return index;
}

void Lanes::release(std::uint32_t index) noexcept { free_buffers_.push_back(index); }

bool Lanes::take(lane::Pair& p, PeerId peer, Completion& c)
{
    const std::uint32_t b = free_buffer();
    Buffer& buf = *buffers_[b];
    std::optional<lane::RingRecord> rec;
    try {
        rec = p.receive(buf.bytes);
    } catch (const Error& e) { // the peer broke the protocol: it is lost (tend)
        release(b);
        broken_.emplace_back(peer, fmt::format("its same-host lane broke: {}", e.what()));
        return false;
    }
    if (!rec) {
        release(b); // a message in parts, not whole yet
        return false;
    }
    c = Completion{};
    c.peer = peer;
    if (rec->kind == static_cast<std::uint16_t>(lane::RecordKind::notify)) {
        c.op = Op::notify;
        std::memcpy(&c.data, buf.bytes.data(), 4);
        release(b);
    } else if (rec->kind == static_cast<std::uint16_t>(lane::RecordKind::note)) {
        c.op = Op::notify; // with a payload, as a note through libfabric
        std::memcpy(&c.data, buf.bytes.data(), 4);
        c.message = std::span<const std::byte>(buf.bytes.data() + 4, rec->length - 4);
        c.lent = &buf.tag;
    } else {
        c.op = Op::recv;
        c.len = rec->length;
        c.message = std::span<const std::byte>(buf.bytes.data(), rec->length);
        c.lent = &buf.tag;
    }
    return true;
}

std::size_t Lanes::pull(std::span<Completion> out)
{
    if (!failed_.empty()) {
        Error e = failed_.front();
        failed_.erase(failed_.begin());
        throw e;
    }
    if (armed_) {
        armed_ = false;
        for (Link& l : links_)
            for (auto& p : l.pairs)
                p->disarm();
    }
    std::size_t n = 0;
    while (n < out.size() && !leftover_.empty()) { // a lost peer's last records first
        out[n++] = leftover_.front();
        leftover_.pop_front();
    }
    // Round-robin from next_, which moves on by one each time (no division:
    // a spinning poller comes here between every two looks at its memory).
    const std::size_t count = links_.size();
    if (next_ >= count)
        next_ = 0;
    std::size_t i = next_;
    for (std::size_t k = 0; k < count && n < out.size(); ++k) {
        const PeerId peer{static_cast<std::uint32_t>(i)};
        for (auto& p : links_[i].pairs) // an inbox works before the peer's hello came
            while (n < out.size() && p->waiting() && take(*p, peer, out[n]))
                ++n;
        if (++i == count)
            i = 0;
    }
    ++next_;
    return n;
}

bool Lanes::quiet() noexcept
{
    armed_ = true;
    for (Link& l : links_)
        for (auto& p : l.pairs)
            if (!p->arm())
                return false;
    // Hellos and connections to take, control to read: the descriptors say so.
    return failed_.empty() && leftover_.empty();
}

} // namespace weft::detail
