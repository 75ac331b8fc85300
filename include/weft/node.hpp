// SPDX-License-Identifier: MIT
/// @brief One process on one fabric, for any number of peers: one domain, one
/// completion queue (one progress thread at most) and, for MSG, one event
/// queue, whatever the number of peers.
///
///     auto node = weft::Node::open(options);           // chooses the provider, says why
///     send node->address().encode() to the peers, and learn theirs (a store, a server...)
///     weft::PeerId p = node->add_peer(weft::NodeAddress::decode(bytes));
///     auto mr = node->allocate(1 << 20, weft::Access::remote_write); // for every peer
///     node->write_notify(p, src, their_region, 0, 42, &ctx);
///     weft::Completion c = node->wait_for(weft::Op::notify, weft::Deadline::after(5s));
///     c.peer: which peer's notification it is
///
/// RDM: one endpoint and its address vector (FI_AV_TABLE); a peer is an
/// address-vector entry (add_peer sends nothing), and the provider names the
/// source of what arrives (FI_SOURCE). Both sides add each other before
/// traffic. MSG: one endpoint per peer, bound to the Node's queues, connected
/// on first use (or eagerly with connect()); the Node's listener accepts the
/// peers that connect to it, known or not; two Nodes that connect to each
/// other at once keep one connection (the lower instance's).
///
/// Memory registered on a Node works with every peer, and a peer that learns
/// a region's RemoteRegion can reach it (keys are domain-wide): peers that
/// must not reach each other's memory need Nodes of their own.
///
/// A peer is lost when an operation to it fails, its connection breaks, or
/// the application says so (mark_lost: its side channel closed); lost() lists
/// them and posting to one throws Error with peer_lost(). The others go on.
///
/// Threading: one thread at a time (the data path takes no locks). A weft
/// progress thread, when running, only drives the queue.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/completions.hpp"
#include "weft/endpoint.hpp"
#include "weft/event_queue.hpp"
#include "weft/fabric.hpp"
#include "weft/listener.hpp"
#include "weft/node_address.hpp"
#include "weft/select.hpp"

namespace weft {

class Node {
public:
    /// Chooses the provider (Selection::report() says why) and opens the
    /// fabric, domain, queues and the RDM endpoint or MSG listener.
    static std::shared_ptr<Node> open(const Options& options = {});
    /// The same provider and endpoint kind as `peer` (joining peers that chose).
    static std::shared_ptr<Node> open_like(const Options& options, const NodeAddress& peer);
    ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    const Selection& selection() const noexcept { return *selection_; }
    const NodeAddress& address() const noexcept { return *address_; }
    std::string_view provider() const noexcept { return selection_->provider(); }
    EndpointKind kind() const noexcept { return selection_->kind(); }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    Completions& completions() noexcept { return *q_; }

    // ---- peers ----
    /// A peer at `address`: RDM inserts it into the address vector, MSG only
    /// remembers it. Adding the same Node twice gives the same PeerId.
    PeerId add_peer(const NodeAddress& address);
    /// Ends a peer: its connection closes (MSG) or its entry goes (RDM); later
    /// posts to it are UsageError. Completions already queued still name it.
    void remove_peer(PeerId peer);
    /// Connects now (MSG; RDM: nothing to do) instead of on the first post.
    void connect(PeerId peer, Deadline deadline);
    bool connected(PeerId peer) const;
    /// Peers currently known (added, or connected to this Node), not removed.
    std::vector<PeerId> peers() const;
    /// The address a peer was added with (none for a peer that connected first).
    const NodeAddress* address_of(PeerId peer) const;
    std::vector<PeerId> lost() const;
    bool is_lost(PeerId peer) const;
    /// Records that `peer` is gone (e.g. its side channel closed), with why.
    void mark_lost(PeerId peer, std::string why);

    // ---- memory: registered once, usable with every peer ----
    std::shared_ptr<MemoryRegion> allocate(std::size_t size, Access access,
                                           Placement placement = Placement::anywhere);
    std::shared_ptr<MemoryRegion> register_memory(std::span<std::byte> memory, Access access);

    // ---- data path (Endpoint's, to a peer; a MSG peer is connected first) ----
    void write(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
               void* context)
    {
        auto& r = route(peer, "write");
        r.ep->write(src, dst, offset, context, Peer{r.addr});
    }
    void read(PeerId peer, Local dst, const RemoteRegion& src, std::uint64_t offset,
              void* context)
    {
        auto& r = route(peer, "read");
        r.ep->read(dst, src, offset, context, Peer{r.addr});
    }
    void write_notify(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
                      std::uint32_t value, void* context)
    {
        auto& r = route(peer, "write_notify");
        r.ep->write_notify(src, dst, offset, value, context, Peer{r.addr});
    }
    void send(PeerId peer, Local src, void* context)
    {
        auto& r = route(peer, "send");
        r.ep->send(src, context, Peer{r.addr});
    }
    /// The endpoint and address that carry traffic to `peer` (connected first
    /// when MSG), for Endpoint's other calls (writev, atomics, flush...).
    Endpoint& endpoint(PeerId peer);
    Peer fabric_peer(PeerId peer);

    // ---- completions (Completion::peer names the peer of a notification or message) ----
    std::size_t poll(std::span<Completion> out);
    std::optional<Completion> poll_one();
    Completion wait(void* context, Deadline deadline);
    Completion wait_for(Op op, Deadline deadline);
    /// The next `op` that `peer` caused; others are kept for later.
    Completion wait_for(Op op, PeerId peer, Deadline deadline);
    /// Drives progress and connection events (accepting and greeting
    /// connecting peers) without handing out completions.
    void progress();

    // ---- sleeping (Options::waiting = Waiting::sleep) ----
    /// A descriptor that turns readable when a completion or a connection
    /// event arrives, for the application's own epoll / event loop; -1 with
    /// Waiting::spin. Before sleeping on it, ask trywait().
    int fd() const noexcept { return epoll_fd_; }
    /// True when nothing is pending, so the caller may sleep on fd() now; else
    /// poll() first (fi_trywait over the Node's queues).
    bool trywait();
    /// Sleeps until something may be ready or `deadline` passes (poll() next).
    void sleep(Deadline deadline);

    struct Private;
    Node(Private, std::shared_ptr<const Selection> selection, std::uint64_t instance);

private:
    struct Route {
        Endpoint* ep = nullptr;
        fi_addr_t addr = FI_ADDR_UNSPEC;
    };
    struct PeerEntry {
        enum class State : std::uint8_t { added, connecting, accepting, ready, lost, removed };
        State state = State::added;
        std::optional<NodeAddress> address;
        std::uint64_t instance = 0;
        fi_addr_t addr = FI_ADDR_UNSPEC; // RDM
        std::shared_ptr<Endpoint> ep;    // MSG: the connection; RDM: the Node's endpoint
        std::string why;                 // lost: what happened
    };

    Route& route(PeerId peer, const char* call)
    {
        if (peer.index < routes_.size() && routes_[peer.index].ep) [[likely]]
            return routes_[peer.index];
        return route_slow(peer, call);
    }
    Route& route_slow(PeerId peer, const char* call);
    PeerEntry& entry(PeerId peer, const char* call);
    PeerId new_peer();
    void events();
    void on_request(EventQueue::Event ev);
    void connect_msg(PeerId peer);
    void ready(PeerId peer);
    void lose(PeerId peer, std::string why);

    std::shared_ptr<const Selection> selection_;
    std::uint64_t instance_;
    std::optional<NodeAddress> address_;
    std::shared_ptr<Fabric> fabric_;
    std::shared_ptr<Domain> domain_;
    std::shared_ptr<Completions> completions_;
    Completions* q_ = nullptr;
    std::shared_ptr<EventQueue> eq_;          // MSG: the listener's and every endpoint's
    std::shared_ptr<Listener> listener_;      // MSG
    std::shared_ptr<Endpoint> rdm_;           // RDM
    std::vector<PeerEntry> peers_;
    std::vector<Route> routes_;               // the fast path's one indexed load
    std::unordered_map<std::uint64_t, std::uint32_t> by_instance_;
    std::unordered_map<const void*, std::uint32_t> by_fid_; // MSG endpoints' fids
    std::vector<std::uint32_t> pending_;      // MSG: connecting or accepting
    int epoll_fd_ = -1;                       // Waiting::sleep: the queue's and the event queue's
};

} // namespace weft
