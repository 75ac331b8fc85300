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

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/error.hpp"
#include "weft/node.hpp"
#include "wire.hpp"

namespace weft {
namespace {

std::vector<std::byte> request_data(std::uint64_t instance)
{
    wire::Writer w;
    for (const char c : {'W', 'F', 'N', 'C'})
        w.u8(static_cast<std::uint8_t>(c));
    w.u8(1);
    w.u64(instance);
    return w.data();
}

std::optional<std::uint64_t> request_instance(std::span<const std::byte> data)
{
    constexpr std::size_t size = 13; // "WFNC", version 1, instance: fits IB's 56 B
    if (data.size() < size || std::memcmp(data.data(), "WFNC", 4) != 0 ||
        std::to_integer<std::uint8_t>(data[4]) != 1)
        return std::nullopt;
    wire::Reader r(data.subspan(5, 8), "connection request");
    return r.u64();
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
    PeerEntry& e = entry(peer, "Node::connect");
    if (rdm_ || e.state == PeerEntry::State::ready)
        return;
    if (e.state == PeerEntry::State::added)
        connect_msg(peer);
    const bool late = deadline.expired();
    for (std::uint32_t spins = 1;; ++spins) {
        events();
        q_->stash_some(); // the hellos arrive as completions
        const PeerEntry& now = peers_[peer.index];
        if (now.state == PeerEntry::State::ready)
            return;
        if (now.state == PeerEntry::State::lost)
            throw Error("Node::connect", -FI_ECONNREFUSED, std::string(provider()),
                        fmt::format("peer {}: {}", peer.index, now.why), nullptr, true);
        if (now.state == PeerEntry::State::removed)
            throw UsageError("Node::connect", -FI_EINVAL, std::string(provider()),
                             fmt::format("peer {} was removed while connecting", peer.index));
        if ((spins & 255u) == 0 && deadline.expired())
            detail::throw_error(
                "Node::connect", -FI_ETIMEDOUT, provider(),
                late ? "the deadline had already passed when the connect began"
                     : fmt::format("peer {} did not complete its connection before the deadline: "
                                   "is its Node running and polling (a Node accepts and greets "
                                   "connections while it polls, waits, or progresses)?",
                                   peer.index));
    }
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
    e.ep = Endpoint::open_msg(domain_, aimed_at(selection_->info(), *e.address),
                              selection_->options(), eq_, completions_, peer);
    by_fid_[&e.ep->get()->fid] = peer.index;
    e.ep->begin_connect(request_data(instance_));
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
            by_fid_.erase(&e.ep->get()->fid); // theirs is: drop our attempt
            e.ep->close();
            e.ep.reset();
            break;
        default: // connected, lost or removed: one connection per peer
            listener_->reject(ev);
            return;
        }
    } else {
        peer = new_peer();
        peers_[peer.index].instance = *instance;
        by_instance_[*instance] = peer.index;
    }
    PeerEntry& e = peers_[peer.index];
    try {
        e.ep = Endpoint::open_msg(domain_, std::move(*ev.info), selection_->options(), eq_,
                                  completions_, peer);
        by_fid_[&e.ep->get()->fid] = peer.index;
        e.ep->begin_accept();
        e.state = PeerEntry::State::accepting;
        pending_.push_back(peer.index);
    } catch (const std::exception& x) {
        lose(peer, fmt::format("accepting its connection failed: {}", x.what()));
    }
}

void Node::events()
{
    while (auto ev = eq_->read_any()) {
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
            lose(peer, fmt::format("its connection failed: {} ({})", ev->error_text,
                                   fi_strerror(-ev->error)));
            continue;
        }
        if (ev->type == FI_CONNECTED)
            e.ep->connected();
        else if (ev->type == FI_SHUTDOWN)
            lose(peer, "it closed the connection (it exited, was killed, or removed this Node)");
    }
    // Connections whose hellos are through are ready.
    std::erase_if(pending_, [&](std::uint32_t i) {
        PeerEntry& e = peers_[i];
        if (e.state != PeerEntry::State::connecting && e.state != PeerEntry::State::accepting)
            return true;
        if (!e.ep || !e.ep->ready())
            return false;
        ready(PeerId{i});
        return true;
    });
}

} // namespace weft
