// SPDX-License-Identifier: MIT
/// @brief Node's data path, inline so that a post costs what the Endpoint's
/// does (private to Node; out of node.hpp for its length). Included at the
/// end of weft/peers/node.hpp. A route on the same-host lane goes out of
/// line (src/peers/node_lane.cpp): one compare on the fast path.
#pragma once

#include "weft/peers/node.hpp"

namespace weft {

template <class Post>
[[gnu::always_inline]] inline decltype(auto) Node::with_route(PeerId peer, const char* call,
                                                              Post&& post)
{
    const Use use(*this, call, Use::Reap::no);
    auto& r = route(peer, call);
    return post(*r.ep, Peer{r.addr});
}

[[gnu::always_inline]] inline void Node::write(PeerId peer, Local src, const RemoteRegion& dst,
                                               std::uint64_t offset, void* context)
{
    const Use use(*this, "Node::write", Use::Reap::no);
    auto& r = route(peer, "Node::write");
    if (r.lane) [[unlikely]] {
        if (!lane_fast<true>(r, src, dst, offset, context))
            lane_post(peer, *r.lane, LaneOp::write, src, &dst, offset, 0, context);
        return;
    }
    r.ep->write(src, dst, offset, context, Peer{r.addr});
}

[[gnu::always_inline]] inline void Node::read(PeerId peer, Local dst, const RemoteRegion& src,
                                              std::uint64_t offset, void* context)
{
    const Use use(*this, "Node::read", Use::Reap::no);
    auto& r = route(peer, "Node::read");
    if (r.lane) [[unlikely]] {
        if (!lane_fast<false>(r, dst, src, offset, context))
            lane_post(peer, *r.lane, LaneOp::read, dst, &src, offset, 0, context);
        return;
    }
    r.ep->read(dst, src, offset, context, Peer{r.addr});
}

inline void Node::read_ranges(PeerId peer, std::span<const Endpoint::Read> reads,
                              const RemoteRegion& src, void* context)
{
    const Use use(*this, "Node::read_ranges", Use::Reap::no);
    auto& r = route(peer, "read_ranges");
    if (r.lane) [[unlikely]]
        return lane_read_ranges(peer, *r.lane, reads, src, context);
    r.ep->read_ranges(reads, src, context, Peer{r.addr});
}

[[gnu::always_inline]] inline void Node::write_notify(PeerId peer, Local src,
                                                      const RemoteRegion& dst,
                                                      std::uint64_t offset, std::uint32_t value,
                                                      void* context)
{
    const Use use(*this, "Node::write_notify", Use::Reap::no);
    auto& r = route(peer, "write_notify");
    if (r.lane) [[unlikely]]
        return lane_post(peer, *r.lane, LaneOp::write_notify, src, &dst, offset, value, context);
    r.ep->write_notify(src, dst, offset, value, context, Peer{r.addr});
}

[[gnu::always_inline]] inline void Node::send(PeerId peer, Local src, void* context)
{
    const Use use(*this, "Node::send", Use::Reap::no);
    auto& r = route(peer, "send");
    if (r.lane) [[unlikely]]
        return lane_post(peer, *r.lane, LaneOp::send, src, nullptr, 0, 0, context);
    r.ep->send(src, context, Peer{r.addr});
}

[[gnu::always_inline]] inline Completion Node::wait(void* context, Deadline deadline)
{
    const Use use(*this, "Node::wait");
    return q_->wait(context, deadline);
}

[[gnu::always_inline]] inline Completion Node::wait(void* context, PeerId peer, Deadline deadline)
{
    const Use use(*this, "Node::wait");
    const Waited waited(waiting_, peer);
    return q_->wait(context, deadline);
}

} // namespace weft
