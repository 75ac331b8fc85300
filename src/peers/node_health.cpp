// SPDX-License-Identifier: MIT
// A Node's view of its peers' health: peers lost (a failed completion of
// theirs, a broken connection, a closed side channel it watches, or the
// application's word), peers retired from another thread, and the
// one-thread-at-a-time rule (Node::Use) that makes the latter necessary.
#include <poll.h>

#include <algorithm>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "lanes.hpp"
#include "weft/peers/node.hpp"

namespace weft {

std::vector<PeerId> Node::lost() const
{
    std::vector<PeerId> out;
    for (std::uint32_t i = 0; i < peers_.size(); ++i)
        if (peers_[i].state == PeerEntry::State::lost)
            out.push_back(PeerId{i});
    return out;
}

bool Node::is_lost(PeerId peer) const
{
    return peer.index < peers_.size() && peers_[peer.index].state == PeerEntry::State::lost;
}

void Node::retire_peer(PeerId peer) noexcept
{
    if (const Use use(*this, std::try_to_lock); use) {
        if (peer.index < peers_.size())
            remove_now(peer);
        return;
    }
    {
        const std::lock_guard lock(retired_mutex_);
        retired_.push_back(peer);
    }
    retired_flag_.store(true, std::memory_order_release);
}

void Node::reap_retired() noexcept
{
    std::vector<PeerId> gone;
    {
        const std::lock_guard lock(retired_mutex_);
        gone.swap(retired_);
        retired_flag_.store(false, std::memory_order_relaxed);
    }
    for (const PeerId p : gone)
        if (p.index < peers_.size())
            remove_now(p);
}

void Node::Use::busy(const char* call)
{
    throw UsageError(call, -FI_EBUSY, "",
                     "another thread is inside this Node (or a Connection of the same Server, "
                     "which share one): a Node is used by one thread at a time. Drive a Node's "
                     "peers from one thread (an event loop on Node::fd() serves hundreds), or "
                     "give each thread a Node (Server) of its own");
}

void Node::mark_lost(PeerId peer, std::string why)
{
    const Use use(*this, "Node::mark_lost");
    (void)entry(peer, "Node::mark_lost");
    lose(peer, std::move(why));
}

void Node::lose(PeerId peer, std::string why)
{
    PeerEntry& e = peers_[peer.index];
    if (e.state == PeerEntry::State::removed || e.state == PeerEntry::State::lost)
        return;
    routes_[peer.index] = {};
    unwatch(peer);
    if (lanes_)
        lanes_->forget(peer);
    e.state = PeerEntry::State::lost;
    e.why = std::move(why);
    e.refusal.clear();
    const bool closed = e.ep && e.ep != rdm_;
    if (closed) {
        by_fid_.erase(e.fid);
        e.ep->close();
    } else if (e.ep) {
        rdm_->set_sharers(--rdm_peers_);
    }
    // Every awaited operation to it fails now, and every wait on it ends.
    if (dispatcher_.in_flight(peer) || !dispatcher_.idle())
        dispatcher_.peer_lost(
            peer,
            std::make_exception_ptr(Error("Node", -FI_ECONNRESET, std::string(provider()),
                                          fmt::format("peer {} is lost ({})", peer.index, e.why),
                                          nullptr, true)),
            closed);
}

bool Node::side_channel_open(PeerId peer, std::chrono::milliseconds settle)
{
    for (const Watched& w : watched_) {
        if (w.peer != peer)
            continue;
        pollfd p{w.fd, POLLRDHUP, 0};
        const int ms = static_cast<int>(settle.count());
        return ::poll(&p, 1, ms) == 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
    }
    return false;
}

void Node::refused(PeerId peer, const char* call)
{
    PeerEntry& e = peers_[peer.index];
    std::string why = std::exchange(e.refusal, {});
    // A peer killed closes both connections: give its side channel's end a
    // moment to show before calling it a refusal.
    if (!side_channel_open(peer, std::chrono::milliseconds(200))) {
        lose(peer, "it is gone: its side channel closed (it exited, was killed, or closed its "
                   "connection)");
        throw Error(call, -FI_ECONNRESET, std::string(provider()),
                    fmt::format("peer {} is lost ({}): nothing was posted", peer.index,
                                e.why),
                    nullptr, true);
    }
    throw Error(call, -FI_EACCES, std::string(provider()), std::move(why));
}

void Node::idle()
{
    tend();
    if (waiting_ && waiting_.index < peers_.size() && !peers_[waiting_.index].refusal.empty() &&
        Clock::now() - peers_[waiting_.index].refused_at >= refusal_grace)
        refused(waiting_, "Node::wait");
    // A peer waited for that is lost sends nothing more: say so now, not at
    // the deadline (what it sent before is handed out first).
    if (waiting_ && is_lost(waiting_))
        throw Error("Node::wait", -FI_ECONNRESET, std::string(provider()),
                    fmt::format("peer {} is lost ({}) while this side waited on it",
                                waiting_.index, peers_[waiting_.index].why),
                    nullptr, true);
}

void Node::watch(PeerId peer, int fd)
{
    const Use use(*this, "Node::watch");
    (void)entry(peer, "Node::watch");
    if (fd < 0)
        throw UsageError("Node::watch", -FI_EINVAL, std::string(provider()),
                         "watch() needs an open descriptor (the peer's side channel)");
    watched_.push_back({fd, peer});
}

void Node::unwatch(PeerId peer) noexcept
{
    std::erase_if(watched_, [peer](const Watched& w) { return w.peer == peer; });
}

void Node::check_watched()
{
    if (watched_.empty())
        return;
    const auto now = Clock::now();
    if (now < next_watch_)
        return;
    next_watch_ = now + std::chrono::milliseconds(1);
    std::vector<pollfd> fds;
    fds.reserve(watched_.size());
    for (const Watched& w : watched_)
        fds.push_back({w.fd, POLLRDHUP, 0});
    if (::poll(fds.data(), fds.size(), 0) <= 0)
        return;
    std::vector<PeerId> gone;
    for (std::size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
            gone.push_back(watched_[i].peer);
    for (const PeerId p : gone)
        lose(p, "it is gone: its side channel closed (it exited, was killed, or closed its "
                 "connection)");
}

const std::string* Node::gone_check(void* node, const Endpoint& ep, fi_addr_t dest)
{
    Node& n = *static_cast<Node*>(node);
    n.check_watched();
    if (const PeerId peer = ep.peer()) // MSG: the endpoint's own peer
        return n.is_lost(peer) ? &n.peers_[peer.index].why : nullptr;
    // RDM: the peer at `dest`; lost only if no live peer has that address.
    const std::string* why = nullptr;
    for (const PeerEntry& e : n.peers_) {
        if (e.addr != dest || e.state == PeerEntry::State::removed)
            continue;
        if (e.state != PeerEntry::State::lost)
            return nullptr;
        why = &e.why;
    }
    return why;
}

void Node::tend()
{
    // Peers whose side channel closed are lost, seen by every entry that
    // tends: a loop that only polls learns of them too.
    if (!watched_.empty()) [[unlikely]]
        check_watched();
    // On tcp every fi_eq_read is an epoll_wait (its connection manager runs
    // inside it), and a busy poller tends on every poll. Connection events
    // are rare: while no connection is being set up, the event queue is read
    // at most every 100 us (and by trywait(), before anyone sleeps).
    if (eq_ && (!pending_.empty() || events_due())) {
        events(); // reaps broken peers too
        if (lanes_) [[unlikely]]
            tend_lanes(false);
        return;
    }
    if (q_->any_broken()) [[unlikely]]
        reap_broken();
    // The lanes' look at their peers (a clock read at least) every 32nd
    // time, as an operation on the lane does: a poller spinning on its
    // memory comes here between every two looks.
    if (lanes_ && lanes_->due()) [[unlikely]]
        tend_lanes(false);
}

bool Node::events_due() noexcept
{
    constexpr auto every = std::chrono::microseconds(100);
    const auto now = Clock::now();
    if (now < next_events_)
        return false;
    next_events_ = now + every;
    return true;
}

void Node::reap_broken()
{
    for (auto& [peer, why] : q_->take_broken())
        if (peer.index < peers_.size())
            lose(peer, fmt::format("an operation of its connection failed: {}", why));
}

} // namespace weft
