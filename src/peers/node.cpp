// SPDX-License-Identifier: MIT
// Node: one domain, one completion queue and (MSG) one event queue for every
// peer (opened in node_open.cpp). Peers are entries in a table whose index is the PeerId; the data
// path's route to a peer is one indexed load (routes_). MSG peers connect on
// first use; the connection request carries the initiator's instance, so the
// acceptor knows which peer it is, and a crossing (both connect at once)
// keeps the lower instance's connection.
#include "weft/peers/node.hpp"
#include "check.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "lanes.hpp"
#include "weft/base/error.hpp"

namespace weft {
// ---- peers ----

PeerId Node::new_peer()
{
    const auto index = static_cast<std::uint32_t>(peers_.size());
    peers_.emplace_back();
    routes_.emplace_back();
    route_count_ = static_cast<std::uint32_t>(routes_.size());
    return PeerId{index};
}

PeerId Node::add_peer(const NodeAddress& address)
{
    return add_peer(address, {});
}

void Node::admit(Gate gate)
{
    const Use use(*this, "Node::admit");
    gate_ = std::move(gate);
}

PeerId Node::add_peer(const NodeAddress& address, std::span<const std::byte> credential)
{
    const Use use(*this, "Node::add_peer");
    if (credential.size() > 32)
        throw UsageError("Node::add_peer", -FI_EINVAL, std::string(provider()),
                         fmt::format("a credential of {} B does not fit a connection request: "
                                     "at most 32 B",
                                     credential.size()));
    if (address.instance() == instance_)
        throw UsageError("Node::add_peer", -FI_EINVAL, std::string(provider()),
                         "this is this Node's own address: a Node is not its own peer (its "
                         "memory is reached directly); add the other Nodes' addresses");
    if (address.provider() != provider() || address.kind() != kind())
        throw UsageError("Node::add_peer", -FI_EINVAL, std::string(provider()),
                         fmt::format("the peer's Node runs {} ({}), this one {} ({}): both must "
                                     "use the same provider and endpoint kind (open one with "
                                     "Node::open_like)",
                                     address.provider(), to_string(address.kind()), provider(),
                                     to_string(kind())));
    if (auto it = by_instance_.find(address.instance()); it != by_instance_.end()) {
        PeerEntry& e = peers_[it->second];
        if (e.state != PeerEntry::State::removed) {
            if (!e.address) {
                e.address = address; // it connected before it was added
                if (rdm_ && e.addr == FI_ADDR_UNSPEC) // on the lane: now on libfabric too
                    join_rdm(PeerId{it->second}, address);
            }
            if (lanes_)
                lanes_->begin(PeerId{it->second}, address);
            return PeerId{it->second};
        }
    }
    const PeerId id = new_peer();
    PeerEntry& e = peers_[id.index];
    e.address = address;
    e.credential.assign(credential.begin(), credential.end());
    e.instance = address.instance();
    by_instance_[e.instance] = id.index;
    if (lanes_)
        lanes_->begin(id, address);
    if (!rdm_)
        return id; // MSG: connected on first use
    join_rdm(id, address);
    ready(id);
    return id;
}

void Node::join_rdm(PeerId id, const NodeAddress& address)
{
    PeerEntry& e = peers_[id.index];
    e.addr = rdm_->insert_peer(address.fabric_address()).addr;
    e.ep = rdm_;
    rdm_->set_sharers(++rdm_peers_);
    q_->source_is(e.addr, id);
    q_->tag_is(static_cast<std::uint32_t>(address.instance()), id);
}

Node::PeerEntry& Node::entry(PeerId peer, const char* call)
{
    if (peer.index >= peers_.size())
        throw UsageError(call, -FI_EINVAL, std::string(provider()),
                         fmt::format("peer {} is not one of this Node's ({} known): use the "
                                     "PeerId add_peer() returned",
                                     peer.index, peers_.size()));
    return peers_[peer.index];
}

void Node::remove_peer(PeerId peer)
{
    const Use use(*this, "Node::remove_peer");
    (void)entry(peer, "Node::remove_peer");
    remove_now(peer);
}

void Node::remove_now(PeerId peer)
{
    unwatch(peer);
    if (lanes_)
        lanes_->forget(peer);
    PeerEntry& e = peers_[peer.index];
    routes_[peer.index] = {};
    if (e.ep && e.ep != rdm_) {
        by_fid_.erase(e.fid);
        e.ep->close();
    } else if (e.ep && e.state != PeerEntry::State::lost && e.state != PeerEntry::State::removed) {
        rdm_->set_sharers(--rdm_peers_);
    }
    e.ep.reset();
    e.state = PeerEntry::State::removed;
}

bool Node::connected(PeerId peer) const
{
    return peer.index < peers_.size() && peers_[peer.index].state == PeerEntry::State::ready;
}

std::vector<PeerId> Node::peers() const
{
    std::vector<PeerId> out;
    for (std::uint32_t i = 0; i < peers_.size(); ++i)
        if (peers_[i].state != PeerEntry::State::removed)
            out.push_back(PeerId{i});
    return out;
}

const NodeAddress* Node::address_of(PeerId peer) const
{
    return peer.index < peers_.size() && peers_[peer.index].address ? &*peers_[peer.index].address
                                                                    : nullptr;
}

void Node::ready(PeerId peer)
{
    PeerEntry& e = peers_[peer.index];
    e.state = PeerEntry::State::ready;
    // A refusal still to report keeps the fast path off until said (route_slow),
    // as a lane not chosen yet does (route_slow chooses).
    if (e.refusal.empty() && (!lanes_ || lanes_->decided(peer)))
        routes_[peer.index] = {e.ep.get(), e.addr, lanes_ ? lanes_->sender(peer, Deadline::never()) : nullptr};
}

Node::Route& Node::route_slow(PeerId peer, const char* call)
{
    PeerEntry& e = entry(peer, call);
    switch (e.state) {
    case PeerEntry::State::removed:
        throw UsageError(call, -FI_EINVAL, std::string(provider()),
                         fmt::format("peer {} was removed (Node::remove_peer): nothing was posted",
                                     peer.index));
    case PeerEntry::State::lost:
        throw Error(call, -FI_ECONNRESET, std::string(provider()),
                    fmt::format("peer {} is lost ({}): nothing was posted", peer.index, e.why),
                    nullptr, true);
    default:
        if (!e.refusal.empty()) [[unlikely]]
            refused(peer, call);
        if (lanes_) {
            // Chosen once, for good: a peer whose hello does not come within
            // lane_patience is libfabric's (Node::path says so).
            if (lane::Pair* lane = lanes_->sender(peer, Deadline::after(detail::lane_patience))) {
                routes_[peer.index] = {e.ep.get(), e.addr, lane};
                return routes_[peer.index];
            }
        }
        connect(peer, Deadline::after(selection_->options().handshake_timeout));
        // (Peers that connected meanwhile may have moved the entries.)
        routes_[peer.index] = {peers_[peer.index].ep.get(), peers_[peer.index].addr};
        return routes_[peer.index];
    }
}

Node::Route& Node::fabric_route(PeerId peer, const char* call)
{
    Route& r = route(peer, call);
    if (r.lane != nullptr) // the peer looks at its queue from now on, if it sleeps
        lanes_->fabric_used(peer);
    if (r.ep != nullptr) [[likely]]
        return r;
    // On the lane, and not connected through libfabric yet (MSG).
    if (!peers_[peer.index].address)
        throw UsageError(call, -FI_EINVAL, std::string(provider()),
                         fmt::format("peer {} reached this Node on the same-host lane and was "
                                     "never added (add_peer): libfabric has no address for it",
                                     peer.index));
    connect(peer, Deadline::after(selection_->options().handshake_timeout));
    r.ep = peers_[peer.index].ep.get();
    r.addr = peers_[peer.index].addr;
    return r;
}

Endpoint& Node::endpoint(PeerId peer)
{
    const Use use(*this, "Node::endpoint");
    return *fabric_route(peer, "Node::endpoint").ep;
}

std::size_t Node::read_ranges_limit(PeerId peer)
{
    const Use use(*this, "Node::read_ranges_limit");
    // The lane reads range by range; it takes what the provider takes, so
    // that a peer's limit does not change with the path.
    const Route& r = route(peer, "read_ranges_limit");
    if (r.lane && r.ep == nullptr)
        return detail::lane_read_ranges_limit;
    return r.ep->read_ranges_limit();
}

Peer Node::fabric_peer(PeerId peer)
{
    const Use use(*this, "Node::fabric_peer");
    return Peer{fabric_route(peer, "Node::fabric_peer").addr};
}

void Node::flush(PeerId peer, const RemoteRegion& readable, Deadline deadline)
{
    const Use use(*this, "Node::flush");
    const Route& r = route(peer, "Node::flush");
    if (r.lane && r.ep == nullptr)
        return; // the lane's writes are in place when they return
    // (On the lane too: a Transfer's writes went through libfabric.)
    r.ep->flush(readable, Peer{r.addr}, deadline);
}

// ---- memory ----

std::shared_ptr<MemoryRegion> Node::allocate(std::size_t size, Access access, Placement placement)
{
    const Use use(*this, "Node::allocate");
    return MemoryRegion::allocate(domain_, size, access, rdm_.get(), placement);
}

std::shared_ptr<MemoryRegion> Node::register_memory(std::span<std::byte> memory, Access access)
{
    const Use use(*this, "Node::register_memory");
    return MemoryRegion::register_memory(domain_, memory, access, rdm_.get());
}

// ---- completions ----

Completion Node::wait_for(Op op, Deadline deadline)
{
    const Use use(*this, "Node::wait_for");
    return q_->wait_for(op, deadline);
}

Completion Node::wait_for(Op op, PeerId peer, Deadline deadline)
{
    const Use use(*this, "Node::wait_for");
    (void)entry(peer, "Node::wait_for");
    const Waited waited(waiting_, peer);
    return q_->wait_for(op, peer, deadline);
}

bool Node::trywait()
{
    if (!epoll_fd_)
        return false;
    // The event queue first: polls read it only every 100 us (tend), and a
    // connection event left in it would keep the descriptor readable.
    if (eq_)
        events();
    tend_lanes(true); // connections and hellos: the lane's listener is in the set
    if (!q_->trywait())
        return false;
    // A queue without a descriptor (shm under the lane) is read after each
    // nap of at most 10 ms (sleep(); the lane's timer wakes an event loop),
    // unless nothing can come on it: nothing of it to arm.
    const bool naps = q_->queue()->naps();
    if (naps && lanes_)
        lanes_->before_sleep();
    fid_t fids[] = {naps ? nullptr : &q_->queue()->get()->fid, eq_ ? &eq_->get()->fid : nullptr};
    const std::size_t n = (naps ? 0 : 1) + (eq_ ? 1 : 0);
    return n == 0 || fi_trywait(fabric_->get(), naps ? fids + 1 : fids, static_cast<int>(n)) == 0;
}

void Node::sleep(Deadline deadline)
{
    if (!epoll_fd_)
        throw UsageError("Node::sleep", -FI_EINVAL, std::string(provider()),
                         "this Node does not sleep (Options::waiting is not Waiting::sleep): "
                         "open it with Waiting::sleep to sleep");
    epoll_event ev{};
    const int ms = deadline.remaining_ms();
    // A queue without a descriptor: the lane's timer, in the set, ends the
    // sleep in 10 ms unless nothing can come on that queue.
    if (q_->queue()->naps() && lanes_)
        lanes_->before_sleep();
    (void)::epoll_wait(epoll_fd_.get(), &ev, 1, ms);
}

void Node::progress()
{
    const Use use(*this, "Node::progress");
    tend();
    tend_lanes(true);
    // Where a killed peer can leave the provider spinning on a lock it held
    // (Quirks::dead_peer_blocks_endpoint: shm, sockets), a Node none of whose
    // peers is alive has nothing to progress, and does not risk it.
    if (domain_->quirks().dead_peer_blocks_endpoint &&
        std::none_of(peers_.begin(), peers_.end(), [](const PeerEntry& e) {
            return e.state != PeerEntry::State::lost && e.state != PeerEntry::State::removed;
        }) && !peers_.empty())
        return;
    // A connection's hellos arrive as completions: while one is pending, take
    // them (whatever else arrives is kept for the next poll or wait).
    if (pending_.empty())
        q_->progress();
    else
        q_->stash_some();
}

} // namespace weft
