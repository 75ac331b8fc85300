// SPDX-License-Identifier: MIT
// A Node's MSG connections: connecting on first use (or connect()), accepting
// whoever connects to its listener, and the events of its one event queue,
// routed to peers by the fid they are about.
//
// A crossing (two Nodes connect to each other at once) keeps one connection:
// the one the lower instance initiated. The higher one accepts it and drops
// its own attempt, whose refusal it then ignores; the lower one refuses the
// higher one's request.
#include <algorithm>
#include <cstring>
#include <utility>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "waits.hpp"
#include "check.hpp"
#include "weft/base/error.hpp"
#include "weft/peers/node.hpp"
#include "retry.hpp"
#include "wire.hpp"

namespace weft {
namespace {

// A Node's connection request: "WFNC", version 1, the initiator's instance,
// then the credential add_peer was given (0..32 B): at most 45 B, within
// InfiniBand's 56 B of private data.
constexpr std::size_t request_head = 13;

std::vector<std::byte> request_data(std::uint64_t instance, std::span<const std::byte> credential)
{
    wire::Writer w;
    w.raw("WFNC");
    w.u8(1);
    w.u64(instance);
    w.raw(credential);
    return w.data();
}

std::optional<std::uint64_t> request_instance(std::span<const std::byte> data)
{
    if (data.size() < request_head || std::memcmp(data.data(), "WFNC", 4) != 0 ||
        std::to_integer<std::uint8_t>(data[4]) != 1)
        return std::nullopt;
    return wire::get_le(data.data() + 5, 8);
}

/// The Node's own selection, aimed at a peer's listener.
Info aimed_at(const Info& mine, const NodeAddress& peer)
{
    Info info = mine;
    fi_info* i = info.get();
    std::free(i->dest_addr);
    i->dest_addr = std::malloc(peer.fabric_address().size());
    if (!i->dest_addr)
        throw std::bad_alloc();
    std::memcpy(i->dest_addr, peer.fabric_address().data(), peer.fabric_address().size());
    i->dest_addrlen = peer.fabric_address().size();
    return info;
}

} // namespace

void Node::connect(PeerId peer, Deadline deadline)
{
    connect(std::span(&peer, 1), deadline);
}

void Node::connect(std::span<const PeerId> peers, Deadline deadline)
{
    const Use use(*this, "Node::connect");
    for (const PeerId peer : peers)
        (void)entry(peer, "Node::connect");
    if (rdm_)
        return;
    for (const PeerId peer : peers)
        if (peers_[peer.index].state == PeerEntry::State::added)
            connect_msg(peer);
    const bool late = deadline.expired();
    std::size_t done = 0; // peers[0, done) are connected
    const auto all_ready = [&] {
        for (; done < peers.size(); ++done) {
            const PeerId peer = peers[done];
            const PeerEntry& now = peers_[peer.index];
            if (now.state == PeerEntry::State::ready)
                continue;
            if (now.state == PeerEntry::State::lost)
                throw Error("Node::connect", -FI_ECONNREFUSED, std::string(provider()),
                            fmt::format("peer {}: {}", peer.index, now.why), nullptr, true);
            if (now.state == PeerEntry::State::removed)
                throw UsageError("Node::connect", -FI_EINVAL, std::string(provider()),
                                 fmt::format("peer {} was removed while connecting", peer.index));
            return false;
        }
        return true;
    };
    detail::spin_until(
        deadline, all_ready,
        [&] {
            events();
            q_->stash_some(); // the hellos arrive as completions
        },
        [&] {
            detail::throw_error(
                "Node::connect", -FI_ETIMEDOUT, provider(),
                late ? "the deadline had already passed when the connect began"
                     : fmt::format("peer {} did not complete its connection before the deadline "
                                   "({} of {} connected): is its Node running and polling (a Node "
                                   "accepts and greets connections while it polls, waits, or "
                                   "progresses)?",
                                   peers[done].index, done, peers.size()));
        });
}

void Node::connect_msg(PeerId peer)
{
    PeerEntry& e = peers_[peer.index];
    if (!e.address)
        throw UsageError("Node::connect", -FI_EINVAL, std::string(provider()),
                         fmt::format("peer {} connected to this Node without an address this "
                                     "Node knows, and its connection is gone: add_peer() its "
                                     "address to reach it",
                                     peer.index));
    // On iWARP the port rdma_cm picked for this end may be one a TCP socket
    // holds: fi_connect fails at once, or the clash comes back as an event
    // (events() then connects again).
    const Info info = aimed_at(selection_->info(), *e.address);
    e.ep = detail::retry_on_port_clash(info.get(), [&] {
        auto ep = Endpoint::open_msg(domain_, info, selection_->options(), eq_, completions_, peer);
        ep->set_gone_check(&Node::gone_check, this);
        ep->begin_connect(request_data(instance_, e.credential));
        return ep;
    });
    e.fid = &e.ep->get()->fid;
    by_fid_[e.fid] = peer.index;
    e.state = PeerEntry::State::connecting;
    pending_.push_back(peer.index);
}

void Node::on_request(EventQueue::Event ev)
{
    const auto instance = request_instance(ev.data);
    if (!instance) {
        listener_->reject(ev); // not a Node's request
        return;
    }
    PeerId peer;
    if (auto it = by_instance_.find(*instance); it != by_instance_.end())
        peer = PeerId{it->second};
    if (peer) {
        PeerEntry& e = peers_[peer.index];
        switch (e.state) {
        case PeerEntry::State::added:
            break;
        case PeerEntry::State::connecting:
            if (instance_ < *instance) { // crossed: ours is the one to keep
                listener_->reject(ev);
                return;
            }
            if (e.ep) { // theirs is: drop our attempt (unless their refusal of it did)
                by_fid_.erase(e.fid);
                e.ep->close();
                e.ep.reset();
            }
            break;
        case PeerEntry::State::accepting:
            if (e.established) {
                listener_->reject(ev); // one connection per peer
                return;
            }
            // It gave up on the request we are accepting (a port clash on its
            // side) and asks again: this one replaces it.
            by_fid_.erase(e.fid);
            e.ep->close();
            e.ep.reset();
            break;
        default: // connected, lost or removed: one connection per peer
            listener_->reject(ev);
            return;
        }
    } else {
        const auto credential = ev.data.size() > request_head
                                    ? std::span<const std::byte>(ev.data).subspan(request_head)
                                    : std::span<const std::byte>();
        if (gate_ && !gate_(*instance, credential)) {
            listener_->reject(ev); // not a peer this Node admits
            return;
        }
        peer = new_peer();
        peers_[peer.index].instance = *instance;
        by_instance_[*instance] = peer.index;
    }
    PeerEntry& e = peers_[peer.index];
    try {
        e.ep = Endpoint::open_msg(domain_, std::move(*ev.info), selection_->options(), eq_,
                                  completions_, peer);
        e.ep->set_gone_check(&Node::gone_check, this);
        e.fid = &e.ep->get()->fid;
        by_fid_[e.fid] = peer.index;
        e.ep->begin_accept();
        e.state = PeerEntry::State::accepting;
        pending_.push_back(peer.index);
    } catch (const std::exception& x) {
        lose(peer, fmt::format("accepting its connection failed: {}", x.what()));
    }
}

void Node::drop(PeerId peer)
{
    PeerEntry& e = peers_[peer.index];
    const Endpoint::LastWrite last = e.ep->last_write();
    by_fid_.erase(e.fid);
    e.ep->close();
    keep_closed(std::move(e.ep));
    q_->forget_broken(peer); // the closed connection's cancelled receives
    routes_[peer.index] = {};
    e.state = PeerEntry::State::added;
    e.established = false;
    if (last.region.empty())
        return; // nothing written: nothing of this side's to refuse
    const RemoteRegion& r = last.region;
    e.refused_at = Clock::now();
    e.refusal = fmt::format(
        "peer {} refused an access: its connection was closed by the provider ({}) while the "
        "peer is still there (its side channel is open), as {} does when a target refuses "
        "one. The last write this side posted to it was {} B at offset {} of the region with "
        "key {:#x} (a {} B descriptor, {}): most likely the one refused, for a key the target "
        "has not registered (revoked, or forged), an access the region was not exported "
        "with, or a range outside it. Nothing of a refused write lands; the connection is "
        "made again by the next operation",
        peer.index, provider(), provider(), last.len, last.offset, r.key(), r.length(),
        r.is_writable() ? (r.is_readable() ? "readable and writable" : "writable")
                        : (r.is_readable() ? "read-only" : "without access"));
}

void Node::keep_closed(std::shared_ptr<Endpoint> ep)
{
    if (closed_.size() == max_closed_kept)
        closed_.erase(closed_.begin());
    closed_.push_back(std::move(ep));
}

std::string Node::take_refusal(PeerId peer)
{
    const Use use(*this, "Node::take_refusal");
    if (peer.index >= peers_.size() || rdm_)
        return {};
    PeerEntry& e = peers_[peer.index];
    if (e.state == PeerEntry::State::ready && e.ep && side_channel_open(peer, {}))
        drop(peer); // its FI_SHUTDOWN may not have been read yet
    return std::exchange(e.refusal, {});
}

void Node::reconnect_after_clash(PeerId peer, const std::string& why)
{
    PeerEntry& e = peers_[peer.index];
    if (++e.clashes > 16) {
        lose(peer, fmt::format("its connection clashed with a port in use 16 times: {}", why));
        return;
    }
    by_fid_.erase(e.fid);
    e.ep->close();
    keep_closed(std::move(e.ep));
    try {
        connect_msg(peer);
    } catch (const std::exception& x) {
        lose(peer, fmt::format("connecting again after a port clash failed: {}", x.what()));
    }
}

void Node::retry_port_clash(const std::string& why)
{
    // Which connection clashed is not known: every one not yet established
    // that this Node initiated starts again (the others' requests arrive again).
    const auto waiting = pending_;
    for (const std::uint32_t i : waiting)
        if (peers_[i].state == PeerEntry::State::connecting && !peers_[i].established && peers_[i].ep)
            reconnect_after_clash(PeerId{i}, why);
}

void Node::events()
{
    if (q_->any_broken()) [[unlikely]]
        reap_broken();
    for (;;) {
        std::optional<EventQueue::Event> ev;
        try {
            ev = eq_->read_any();
        } catch (const Error& e) {
            // iWARP: a port clash can fail the read itself, naming no endpoint.
            if (e.code() != -FI_EADDRINUSE)
                throw;
            retry_port_clash(e.what());
            continue;
        }
        if (!ev)
            break;
        if (!ev->error && ev->type == FI_CONNREQ) {
            on_request(std::move(*ev));
            continue;
        }
        const auto it = by_fid_.find(ev->fid);
        if (it == by_fid_.end())
            continue; // an attempt dropped in a crossing, or a closed connection
        const PeerId peer{it->second};
        PeerEntry& e = peers_[peer.index];
        if (ev->error) {
            // A refusal of our attempt that lost a crossing: their connection comes.
            if (ev->error == -FI_ECONNREFUSED && e.state == PeerEntry::State::connecting &&
                instance_ > e.instance) {
                by_fid_.erase(it);
                e.ep->close();
                e.ep.reset();
                continue;
            }
            // An iWARP port clash (retry.hpp): connect again from another port.
            if (ev->error == -FI_EADDRINUSE && e.state == PeerEntry::State::connecting &&
                !e.established) {
                reconnect_after_clash(peer, ev->error_text);
                continue;
            }
            lose(peer, fmt::format("its connection failed: {} ({})", ev->error_text,
                                   fi_strerror(-ev->error)));
            continue;
        }
        if (ev->type == FI_CONNECTED) {
            e.established = true;
            e.ep->connected();
        }
        else if (ev->type == FI_SHUTDOWN) {
            // A peer still there (its side channel open) whose provider closed
            // the connection refused an access (tcp does so); else it is gone.
            if (e.state == PeerEntry::State::ready && side_channel_open(peer, {}))
                drop(peer);
            else
                lose(peer, "it is gone: it closed the connection (it exited, was killed, or "
                           "removed this Node)");
        }
    }
    // Connections whose hellos are through are ready.
    std::erase_if(pending_, [&](std::uint32_t i) {
        PeerEntry& e = peers_[i];
        if (e.state != PeerEntry::State::connecting && e.state != PeerEntry::State::accepting)
            return true;
        if (!e.ep)
            return false;
        if (!e.ep->ready()) {
            e.ep->nudge_if_due();
            return false;
        }
        ready(PeerId{i});
        return true;
    });
}

} // namespace weft
