// SPDX-License-Identifier: MIT
// Node's side of the same-host lane (Options::same_host, src/peers/lanes.hpp):
// the data path to a peer on it, and the peers it brings.
#include <functional>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "lanes.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/detail/ranges.hpp"
#include "weft/peers/node.hpp"

namespace weft {
namespace {

lane::Pair::Target target_of(const RemoteRegion& r, std::uint64_t address)
{
    return {r.key(), address, (r.flags() & RemoteRegion::virt_addr) != 0};
}

/// Whether the lane copies to and from `r`: false where the kernel refuses
/// process_vm_* to the peer and the region is not a segment the peer shares
/// (then libfabric carries it). A region the peer never offered: true, and the
/// lane's copy refuses it as a provider's target would.
[[gnu::noinline]] bool reaches_slow(lane::Pair& pair, const RemoteRegion& r)
{
    try {
        return pair.copies(r.key(), "access");
    } catch (const Error&) {
        return true;
    }
}
inline bool reaches(lane::Pair& pair, const RemoteRegion& r)
{
    // Where the kernel allows process_vm_*, every region is: no lookup.
    return pair.cross_copy_refused().empty() || reaches_slow(pair, r);
}

/// Whether writes posted through libfabric on route `r` (a Node's Route)
/// must be flushed before a read on the lane looks at `remote`, or a
/// notification on it says the data is in place.
template <class Route>
bool unflushed(const Route& r, std::uint64_t flushed, const RemoteRegion& remote)
{
    return r.ep != nullptr && r.ep->writes_posted() != flushed && remote.is_readable();
}

/// memcpy, with sizes up to 16 B copied inline (a call costs more than they do).
inline void copy_bytes(std::byte* to, const std::byte* from, std::size_t len) noexcept
{
    if (len > 16) {
        std::memcpy(to, from, len);
        return;
    }
    if (len >= 8) { // two 8-byte words, overlapping below 16
        std::uint64_t a, b;
        std::memcpy(&a, from, 8);
        std::memcpy(&b, from + len - 8, 8);
        std::memcpy(to, &a, 8);
        std::memcpy(to + len - 8, &b, 8);
    } else if (len >= 4) {
        std::uint32_t a, b;
        std::memcpy(&a, from, 4);
        std::memcpy(&b, from + len - 4, 4);
        std::memcpy(to, &a, 4);
        std::memcpy(to + len - 4, &b, 4);
    } else {
        for (std::size_t i = 0; i < len; ++i)
            to[i] = from[i];
    }
}

} // namespace

// The fast path of a write or read on the lane: a plain copy to the region
// used last, every check of lane_post's a compare. Anything else (due to look
// at the peers, a closed endpoint, libfabric's writes to flush first, memory
// the kernel keeps off the lane, a region not mapped or not the last one
// used, a refusal) goes to lane_post(), which reports it.
template <bool Write>
bool Node::lane_fast(Route& r, const Local& local, const RemoteRegion& remote, std::uint64_t offset,
                     void* context)
{
    if (Write)
        q_->keep_source(local);
    else
        q_->keep_sink(local);
    if (!lanes_->count_if_not_due() || !remote.allows(Write, offset, local.len)) [[unlikely]]
        return false;
    if (r.ep != nullptr &&
        (r.ep->closed() ||
         (!Write && unflushed(r, peers_[static_cast<std::size_t>(&r - routes_.data())].writes_flushed,
                              remote)))) [[unlikely]]
        return false;
    std::byte* at = r.lane->mapped_at(target_of(remote, remote.base() + offset), local.len, Write);
    if (at == nullptr) [[unlikely]]
        return false;
    if (Write)
        copy_bytes(at, local.addr, local.len);
    else
        copy_bytes(local.addr, at, local.len);
    q_->defer_done(context, Write ? Op::write : Op::read, local.len);
    return true;
}
template bool Node::lane_fast<true>(Route&, const Local&, const RemoteRegion&, std::uint64_t, void*);
template bool Node::lane_fast<false>(Route&, const Local&, const RemoteRegion&, std::uint64_t, void*);

void Node::lane_ring(PeerId peer, const std::function<bool()>& push)
{
    // The peer's ring is full while it reads nothing: wait for room, as a
    // post waits out -FI_EAGAIN, and learn of its end meanwhile.
    if (push()) [[likely]]
        return;
    const Deadline deadline = Deadline::after(selection_->options().handshake_timeout);
    for (std::uint32_t spins = 1; !push(); ++spins) {
        if ((spins & 1023) != 0)
            continue;
        tend_lanes(true);
        if (is_lost(peer))
            throw Error("Node", -FI_ECONNRESET, std::string(provider()),
                        fmt::format("peer {} is lost ({}): nothing was sent", peer.index,
                                    peers_[peer.index].why),
                        nullptr, true);
        if (deadline.expired())
            throw TimeoutError("Node", -FI_ETIMEDOUT, std::string(provider()),
                               fmt::format("peer {} took nothing from its same-host lane for {} "
                                           "ms (its ring is full): it does not read its Node",
                                           peer.index,
                                           selection_->options().handshake_timeout.count()));
        std::this_thread::yield();
    }
}

void Node::lane_post(PeerId peer, lane::Pair& pair, LaneOp op, Local local,
                     const RemoteRegion* remote, std::uint64_t offset, std::uint32_t value,
                     void* context, Completion* out)
{
    // Checked (revoked, another Node's, read-only as a sink) and held as a
    // posted operation's regions are, until the caller has its completion
    // (one contract: tests/memory/lifetimes.cpp), as the Endpoint's posts do.
    if (op == LaneOp::read)
        q_->keep_sink(local);
    else
        q_->keep_source(local);
    // A peer that ended is seen by its channel: looked at every 32nd
    // operation (at most every 100 us), so that operations on a dead peer's
    // memory fail soon after it died.
    if (lanes_->due()) [[unlikely]]
        tend_lanes(false);
    if (routes_[peer.index].lane != &pair) [[unlikely]]
        throw Error("Node", -FI_ECONNRESET, std::string(provider()),
                    fmt::format("peer {} is lost ({}): nothing was posted", peer.index,
                                peers_[peer.index].why),
                    nullptr, true);
    if (const Endpoint* ep = routes_[peer.index].ep; ep != nullptr && ep->closed()) [[unlikely]]
        throw UsageError("Node", -FI_EINVAL, std::string(provider()),
                         fmt::format("the endpoint to peer {} is closed (Endpoint::close): the "
                                     "same-host lane closed with it; nothing was posted",
                                     peer.index));
    const auto bytes = std::span<std::byte>(local.addr, local.len);
    // Writes posted through libfabric to this peer (Endpoint's calls, a
    // Transfer) land before a read on the lane looks, or a notification on it
    // says the data is in place: flushed first, where the region can be read.
    if (op == LaneOp::read || op == LaneOp::write_notify) {
        const Route& r = routes_[peer.index];
        PeerEntry& e = peers_[peer.index];
        if (unflushed(r, e.writes_flushed, *remote)) {
            r.ep->flush(*remote, Peer{r.addr},
                        Deadline::after(selection_->options().handshake_timeout));
            e.writes_flushed = r.ep->writes_posted();
        }
    }
    // Memory the kernel does not let this side copy (ptrace): libfabric's.
    if (op != LaneOp::send && out == nullptr && !reaches(pair, *remote)) {
        Route& f = fabric_route(peer, "Node::write");
        if (op == LaneOp::write)
            f.ep->write(local, *remote, offset, context, Peer{f.addr});
        else if (op == LaneOp::read)
            f.ep->read(local, *remote, offset, context, Peer{f.addr});
        else
            f.ep->write_notify(local, *remote, offset, value, context, Peer{f.addr});
        return;
    }
    // Checked here as on libfabric's path: the caller's RemoteRegion and size.
    std::uint64_t address = 0;
    if (op == LaneOp::write || op == LaneOp::write_notify)
        address = remote->write_address(offset, local.len);
    else if (op == LaneOp::read)
        address = remote->read_address(offset, local.len);
    else if (local.len > selection_->options().slot_size)
        throw UsageError("send", -FI_EMSGSIZE, std::string(provider()),
                         fmt::format("a {} B message exceeds the receive slot size of {} B "
                                     "(Options::slot_size): nothing was sent",
                                     local.len, selection_->options().slot_size));
    Op done = Op::write;
    try {
        switch (op) {
        case LaneOp::write:
        case LaneOp::write_notify:
            pair.write(target_of(*remote, address), bytes);
            if (op == LaneOp::write_notify)
                lane_ring(peer, [&] { return pair.notify(value); });
            break;
        case LaneOp::read:
            pair.read(target_of(*remote, address), bytes);
            done = Op::read;
            break;
        case LaneOp::send:
            lane_ring(peer, [&] { return pair.send(bytes); });
            done = Op::send;
            break;
        }
    } catch (const Error& e) {
        if (e.peer_lost()) {
            lose(peer, e.what());
            throw;
        }
        if (out != nullptr || op == LaneOp::send || dynamic_cast<const TimeoutError*>(&e))
            throw;
        // The peer's own checks (its offer's key, bounds and access, the
        // kernel's copy) fail the operation as a provider's target does: a
        // failed completion, thrown by the next poll or wait.
        lanes_->fail(Error(done == Op::read ? "read" : "write", e.code(), std::string(provider()),
                           fmt::format("peer {} refused the access: {}", peer.index, e.what()),
                           context));
        return;
    }
    if (out != nullptr)
        *out = Completion{.context = context, .op = done, .len = local.len};
    else
        q_->defer_done(context, done, local.len);
}

void Node::lane_read_ranges(PeerId peer, lane::Pair& pair, std::span<const Endpoint::Read> reads,
                            const RemoteRegion& src, void* context)
{
    if (!reaches(pair, src)) { // libfabric's (lane_post)
        Route& f = fabric_route(peer, "read_ranges");
        f.ep->read_ranges(reads, src, context, Peer{f.addr});
        return;
    }
    // Every range checked before any is read, as a provider's read_ranges does.
    const std::size_t total =
        detail::check_ranges(reads, src, read_ranges_limit(peer), provider());
    Completion each; // one completion for them all, below
    for (const Endpoint::Read& r : reads)
        lane_post(peer, pair, LaneOp::read, r.dst, &src, r.offset, 0, nullptr, &each);
    q_->defer(Completion{.context = context, .op = Op::read, .len = total});
}

bool Node::on_lane(PeerId peer, const RemoteRegion* region)
{
    if (!lanes_)
        return false;
    const Use use(*this, "Node::on_lane");
    lane::Pair* lane = route(peer, "Node::on_lane").lane;
    return lane != nullptr && (region == nullptr || reaches(*lane, *region));
}

void Node::send_note(PeerId peer, std::uint32_t value, Local payload, void* context)
{
    const Use use(*this, "Node::send_note");
    Route& r = route(peer, "Node::send_note");
    if (r.lane == nullptr) {
        Route& f = fabric_route(peer, "Node::send_note");
        f.ep->send_note(value, payload, context, Peer{f.addr});
        return;
    }
    if (payload.len > 0)
        check_local(payload, false);
    lane::Pair& pair = *r.lane;
    const auto bytes = std::span<const std::byte>(payload.addr, payload.len);
    lane_ring(peer, [&] { return pair.note(value, bytes); });
    q_->defer(Completion{.context = context, .op = Op::send, .len = payload.len});
}

bool Node::lane_now(PeerId peer, LaneOp op, Local local, const RemoteRegion& remote,
                    std::uint64_t offset, std::uint32_t value, Completion& out)
{
    if (!lanes_)
        return false;
    const Use use(*this, "co_await", Use::Reap::no);
    Route& r = route(peer, "co_await");
    if (r.lane == nullptr)
        return false;
    if (op != LaneOp::send && !reaches(*r.lane, remote)) {
        (void)fabric_route(peer, "co_await"); // the awaiter posts through libfabric
        return false;
    }
    lane_post(peer, *r.lane, op, local, &remote, offset, value, nullptr, &out);
    return true;
}

PeerId Node::lane_peer(std::uint64_t instance)
{
    if (auto it = by_instance_.find(instance); it != by_instance_.end()) {
        const PeerEntry& e = peers_[it->second];
        return e.state == PeerEntry::State::removed ? PeerId{} : PeerId{it->second};
    }
    // A co-located Node that added this one first: a peer of the lane alone
    // until it is added here too (add_peer finds it by its instance), or
    // connects (MSG). A gate admits peers by their connection requests: the
    // lane waits for one.
    if (gate_)
        return PeerId{};
    const PeerId id = new_peer();
    PeerEntry& e = peers_[id.index];
    e.instance = instance;
    by_instance_[instance] = id.index;
    return id;
}

void Node::tend_lanes(bool now)
{
    if (!lanes_)
        return;
    for (auto& [peer, why] : lanes_->tend(now))
        if (peer.index < peers_.size() && !is_lost(peer) &&
            peers_[peer.index].state != PeerEntry::State::removed)
            lose(peer, std::move(why));
}

std::string Node::path(PeerId peer) const
{
    if (!lanes_)
        return fmt::format("{} (the same-host lane is off: Options::same_host)", provider());
    return lanes_->path(peer);
}

} // namespace weft
