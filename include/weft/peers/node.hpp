// SPDX-License-Identifier: MIT
/// @brief One process on one fabric, for any number of peers: one domain, one
/// completion queue (one progress thread at most) and, for MSG, one event
/// queue, whatever the number of peers (docs/peers.md).
///
///     auto node = weft::Node::open(options);           // chooses the provider, says why
///     weft::PeerId p = node->add_peer(weft::NodeAddress::decode(bytes_from_the_peer));
///     auto mr = node->allocate(1 << 20, weft::Access::remote_write); // for every peer
///     node->write_notify(p, src, their_region, 0, 42, &ctx);
///     weft::Completion c = node->wait_for(weft::Op::notify, weft::Deadline::after(5s));
///
/// RDM: a peer is an entry of the endpoint's address vector. MSG: one
/// endpoint per peer on the Node's queues, connected on first use. Memory
/// registered on a Node works with every peer (keys are domain-wide). A peer
/// is lost when an operation to it fails, its connection breaks, or the
/// application says so (mark_lost, watch); posting to one throws
/// Error::peer_lost(). The others go on.
///
/// Awaited calls (co_await node.write(..., deadline); weft/async.hpp) are
/// driven by dispatch(): their coroutines resume inside it, on its thread.
///
/// Threading: one thread at a time. The data path takes no lock: a call made
/// while another thread is inside the Node is refused with UsageError (it
/// never reaches the provider), so misuse is reported, never a crash. A weft
/// progress thread, when running, only drives the queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/fabric/completions.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/fabric/event_queue.hpp"
#include "weft/fabric/fabric.hpp"
#include "weft/fabric/listener.hpp"
#include "weft/peers/detail/dispatcher.hpp"
#include "weft/peers/node_address.hpp"
#include "weft/select/select.hpp"

namespace weft {

namespace lane { class Pair; } // the same-host lane's, src/lane

namespace detail {
class Lanes;
class OpAwait;
class NoteAwait;
class CountAwait;
} // namespace detail

class Node : public std::enable_shared_from_this<Node> {
public:
    /// Chooses the provider (Selection::report() says why) and opens everything.
    static std::shared_ptr<Node> open(const Options& options = {});
    /// The same provider and endpoint kind as `peer` (joining peers that chose).
    static std::shared_ptr<Node> open_like(const Options& options, const NodeAddress& peer);
    /// On a selection made elsewhere (a Server's, or a client's for its server).
    static std::shared_ptr<Node> open(std::shared_ptr<const Selection> selection);
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
    /// A peer at `address` (RDM: an address-vector entry; MSG: remembered); the same twice: one id.
    PeerId add_peer(const NodeAddress& address);
    /// The same, presenting `credential` (at most 32 B) in the MSG connection
    /// request, for a peer whose Node admits only what its gate lets in.
    PeerId add_peer(const NodeAddress& address, std::span<const std::byte> credential);
    /// MSG: who may connect without having been added: without a gate, any weft
    /// Node; with one, only those gate(instance, credential) accepts.
    using Gate = std::function<bool(std::uint64_t instance, std::span<const std::byte> credential)>;
    void admit(Gate gate);
    /// Ends a peer: its connection closes (MSG) or its entry goes (RDM); later
    /// posts to it are UsageError. Completions already queued still name it.
    void remove_peer(PeerId peer);
    /// Connects now (MSG; RDM: nothing to do) instead of on the first post.
    void connect(PeerId peer, Deadline deadline);
    /// The same for many peers at once: every connection begun, then all awaited.
    void connect(std::span<const PeerId> peers, Deadline deadline);
    bool connected(PeerId peer) const;
    /// Peers currently known (added, or connected to this Node), not removed.
    std::vector<PeerId> peers() const;
    /// The address a peer was added with (none for a peer that connected first).
    const NodeAddress* address_of(PeerId peer) const;
    std::vector<PeerId> lost() const;
    bool is_lost(PeerId peer) const;
    /// Records that `peer` is gone (e.g. its side channel closed), with why.
    void mark_lost(PeerId peer, std::string why);
    /// Ties `peer` to a descriptor it holds the other end of (its side channel):
    /// once that end closes, the peer is lost. Looked at while the Node polls,
    /// waits or progresses, at most once a millisecond. Keep `fd` open until removal.
    void watch(PeerId peer, int fd);
    /// MSG: after an operation to `peer` failed with its connection gone while its
    /// side channel is open: what this side last wrote to it, the access it most
    /// likely refused (tcp drops a connection to refuse one), or "". Reported once.
    std::string take_refusal(PeerId peer);
    /// remove_peer from any thread: now if the Node is free, else by the next call into it.
    void retire_peer(PeerId peer) noexcept;

    // ---- memory: registered once, usable with every peer ----
    std::shared_ptr<MemoryRegion> allocate(std::size_t size, Access access,
                                           Placement placement = Placement::anywhere);
    std::shared_ptr<MemoryRegion> register_memory(std::span<std::byte> memory, Access access);

    // ---- data path (Endpoint's, to a peer; a MSG peer is connected first) ----
    /// `post(endpoint, to)` under one hold of the Node, with the route to
    /// `peer` (libfabric's; a peer on the same-host lane is posted to by
    /// the calls below, which see to both). The data path's bodies are inline,
    /// in weft/peers/detail/node_data.hpp.
    template <class Post>
    decltype(auto) with_route(PeerId peer, const char* call, Post&& post);
    void write(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
               void* context);
    void read(PeerId peer, Local dst, const RemoteRegion& src, std::uint64_t offset,
              void* context);
    /// Endpoint::read_ranges: several ranges of `src`, one operation, one completion.
    void read_ranges(PeerId peer, std::span<const Endpoint::Read> reads, const RemoteRegion& src,
                     void* context);
    /// Most ranges read_ranges() takes to `peer` (a MSG peer is connected first).
    std::size_t read_ranges_limit(PeerId peer);
    void write_notify(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
                      std::uint32_t value, void* context);
    void send(PeerId peer, Local src, void* context);
    /// Which path carries this side's operations to `peer`, and why: its
    /// provider, or weft's same-host lane (Options::same_host).
    std::string path(PeerId peer) const;
    /// Whether the same-host lane carries this side's operations to `peer`
    /// (chosen on first use: this call may make it); with `region`, to that region.
    bool on_lane(PeerId peer, const RemoteRegion* region = nullptr);
    /// Endpoint::send_note to `peer`: a notification with a payload, after
    /// what was posted to it before (on the lane: on return).
    void send_note(PeerId peer, std::uint32_t value, Local payload, void* context);
    /// What carries traffic to `peer` (MSG: connected first), for Endpoint's other calls.
    Endpoint& endpoint(PeerId peer);
    Peer fabric_peer(PeerId peer);
    /// Returns once every write to `peer` before it is at the peer (Endpoint::flush:
    /// a read of `readable`, a remote-read region of the peer's, behind them).
    void flush(PeerId peer, const RemoteRegion& readable, Deadline deadline);

    // ---- completions (Completion::peer names the peer of a notification or message) ----
    std::size_t poll(std::span<Completion> out);
    std::optional<Completion> poll_one();
    /// Inline, as the posts: a wait that finds its completion at once costs no call.
    Completion wait(void* context, Deadline deadline);
    /// The same, for an operation posted to `peer`: should that peer be lost
    /// meanwhile, Error::peer_lost() at once, not at the deadline.
    Completion wait(void* context, PeerId peer, Deadline deadline);
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
    int fd() const noexcept { return epoll_fd_.get(); }
    /// True when nothing is pending, so the caller may sleep on fd() now; else
    /// poll() first (fi_trywait over the Node's queues).
    bool trywait();
    /// Sleeps until something may be ready or `deadline` passes (poll() next).
    void sleep(Deadline deadline);

    // ---- awaited (weft/async.hpp): co_await one; a stop token cancels the wait ----
    detail::OpAwait write(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
                          Deadline deadline, std::stop_token stop = {});
    detail::OpAwait read(PeerId peer, Local dst, const RemoteRegion& src, std::uint64_t offset,
                         Deadline deadline, std::stop_token stop = {});
    detail::OpAwait write_notify(PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
                                 std::uint32_t value, Deadline deadline, std::stop_token stop = {});
    detail::OpAwait send(PeerId peer, Local src, Deadline deadline, std::stop_token stop = {});
    /// The next notification / message from `from` (PeerId{}: from anyone).
    detail::NoteAwait notification(PeerId from, Deadline deadline, std::stop_token stop = {});
    detail::NoteAwait message(PeerId from, Deadline deadline, std::stop_token stop = {});
    /// `count` notifications from peers of `from`, any order; how many came.
    detail::CountAwait notifications(std::span<const PeerId> from, std::size_t count, Deadline deadline,
                                     std::span<Completion> out = {}, std::stop_token stop = {});
    /// Reads a batch of completions, hands each to what awaits it, then resumes those
    /// waiters, here; returns how many it handed out. Never blocks.
    std::size_t dispatch();
    /// Nothing awaited to `peer` flies, abandoned ones included: its buffers are free.
    bool drained(PeerId peer) const noexcept { return dispatcher_.in_flight(peer) == 0; }
    template <class Task> // runs a weft::Task to its end, dispatching, within `deadline`
    decltype(auto) run(Task&& task, Deadline deadline)
    {
        return std::forward<Task>(task).run_on(*this, deadline);
    }
    /// For weft's awaitables: the arena; settle() takes completions weft kept (an
    /// inject's), route() one batch of the queue's, both resuming nobody; take_kept()
    /// offers a listener what was kept; check_local(): UsageError for a Local a post refuses.
    detail::Dispatcher& dispatcher() noexcept { return dispatcher_; }
    void settle();
    /// With `mine`: its completion, if read, goes to `*own` (the slot freed), not its sink.
    std::size_t route(detail::Slot* mine = nullptr, Completion* own = nullptr);
    bool take_kept(detail::Listener& l);
    /// An awaited operation to a peer on the same-host lane: done now, its
    /// completion in `out`; false when the peer is not on the lane.
    enum class LaneOp : std::uint8_t { write, read, write_notify, send };
    bool lane_now(PeerId peer, LaneOp op, Local local, const RemoteRegion& remote,
                  std::uint64_t offset, std::uint32_t value, Completion& out);
    void check_local(const Local& local, bool sink) const;

    struct Private;
    Node(Private, std::shared_ptr<const Selection> selection, std::uint64_t instance);

    /// Holds the Node for the calling thread for a scope (nested: free); another thread's
    /// call meanwhile is refused. The first hold (not a post's) reaps retire_peer()'s peers.
    class Use {
    public:
        enum class Reap : bool { no, yes };
        Use(Node& node, const char* call, Reap reap = Reap::yes)
            : node_(node)
        {
            if (!enter()) [[unlikely]]
                busy(call);
            if (reap == Reap::yes && outer_ &&
                node_.retired_flag_.load(std::memory_order_relaxed)) [[unlikely]]
                node_.reap_retired();
        }
        /// Does not refuse: false (operator bool) when another thread is inside.
        Use(Node& node, std::try_to_lock_t) noexcept
            : node_(node)
        {
            held_ = enter();
        }
        ~Use()
        {
            if (outer_)
                node_.user_.store(0, std::memory_order_release);
        }
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;
        explicit operator bool() const noexcept { return held_; }

    private:
        bool enter() noexcept
        {
            // The thread pointer: one register read, where a thread_local's address
            // is a __tls_get_addr call inside libweft.so.
            const auto me = reinterpret_cast<std::uintptr_t>(__builtin_thread_pointer());
            std::uintptr_t expected = 0;
            if (node_.user_.compare_exchange_strong(expected, me, std::memory_order_acquire)) [[likely]] {
                outer_ = true;
                return true;
            }
            return expected == me; // nested in this thread's own call
        }
        [[noreturn]] static void busy(const char* call);

        Node& node_;
        bool outer_ = false;
        bool held_ = true;
    };

private:
    /// Names the peer a wait is for (Node::idle fails the wait once it is
    /// lost), and forgets it when the wait ends.
    struct Waited {
        PeerId& slot;
        Waited(PeerId& waiting, PeerId peer) noexcept : slot(waiting) { slot = peer; }
        ~Waited() { slot = PeerId{}; }
        Waited(const Waited&) = delete;
        Waited& operator=(const Waited&) = delete;
    };
    struct Route {
        Endpoint* ep = nullptr;
        fi_addr_t addr = FI_ADDR_UNSPEC;
        lane::Pair* lane = nullptr; // the same-host lane carries this side's operations
    };
    /// The lane's data path (node_lane.cpp): the copy, then its completion deferred as an
    /// inject's, unless `out` takes it (an awaiter's). lane_fast: a plain copy (false: not one).
    template <bool Write> bool lane_fast(Route& r, const Local& l, const RemoteRegion& to, std::uint64_t off, void* ctx);
    void lane_post(PeerId peer, lane::Pair& pair, LaneOp op, Local local, const RemoteRegion* remote,
                   std::uint64_t offset, std::uint32_t value, void* context, Completion* out = nullptr);
    void lane_read_ranges(PeerId peer, lane::Pair& pair, std::span<const Endpoint::Read> reads,
                          const RemoteRegion& src, void* context);
    PeerId lane_peer(std::uint64_t instance);
    /// Pushes onto the peer's ring (`push` false: full), waiting for room within
    /// handshake_timeout and throwing peer_lost once the peer is gone.
    void lane_ring(PeerId peer, const std::function<bool()>& push);
    void tend_lanes(bool now);
    /// route(), connected through libfabric (a lane route may not be yet).
    Route& fabric_route(PeerId peer, const char* call);
    void join_rdm(PeerId id, const NodeAddress& address);
    struct PeerEntry; // weft/peers/detail/peer_entry.hpp

    [[gnu::always_inline]] Route& route(PeerId peer, const char* call)
    {
        if (peer.index < route_count_ &&
            (routes_[peer.index].ep != nullptr) | (routes_[peer.index].lane != nullptr)) [[likely]]
            return routes_[peer.index];
        return route_slow(peer, call);
    }
    Route& route_slow(PeerId peer, const char* call);
    PeerEntry& entry(PeerId peer, const char* call);
    PeerId new_peer();
    void events();
    void idle();
    /// Connection events (MSG) and peers whose operations failed.
    void tend();
    /// True at most every 100 us: time to read the event queue again.
    bool events_due() noexcept;
    void reap_broken();
    void check_watched();
    /// Endpoint::GoneCheck: a post waiting out -FI_EAGAIN asks whether its
    /// peer has been lost meanwhile (its side channel closed).
    static const std::string* gone_check(void* node, const Endpoint& ep, fi_addr_t dest);
    void unwatch(PeerId peer) noexcept;
    void on_request(EventQueue::Event ev);
    void connect_msg(PeerId peer);
    void reconnect_after_clash(PeerId peer, const std::string& why);
    void retry_port_clash(const std::string& why);
    void ready(PeerId peer);
    void lose(PeerId peer, std::string why);
    /// MSG: the provider closed a live peer's connection (a refused access):
    /// closed here too, connected again on the next use; what this side last
    /// posted to it is reported by the next operation or wait (refused()).
    void drop(PeerId peer);
    /// True when `peer` is watched and its side channel shows no end within
    /// `settle` (false when unwatched: nothing tells a live peer apart).
    bool side_channel_open(PeerId peer, std::chrono::milliseconds settle);
    /// Throws the refusal drop() left for `peer`, once; or, if its side
    /// channel has closed meanwhile, loses it and throws that.
    [[noreturn]] void refused(PeerId peer, const char* call);
    void remove_now(PeerId peer);
    void reap_retired() noexcept;
    /// dispatch(): hands `c` to what awaits it; false when nothing does.
    bool claim(const Completion& c);

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
    std::unique_ptr<detail::Lanes> lanes_;    // Options::same_host: the same-host lane
    std::uint32_t rdm_peers_ = 0;             // RDM: live peers rdm_ carries (Endpoint::close)
    std::vector<PeerEntry> peers_;
    std::vector<Route> routes_;               // the fast path's one indexed load
    std::uint32_t route_count_ = 0;           // routes_.size(), without the division
    std::unordered_map<std::uint64_t, std::uint32_t> by_instance_;
    std::unordered_map<const void*, std::uint32_t> by_fid_; // MSG endpoints' fids
    std::vector<std::uint32_t> pending_;      // MSG: connecting or accepting
    detail::Fd epoll_fd_;                     // Waiting::sleep: the queue's and the event queue's
    detail::Fd wake_fd_;                      // Waiting::sleep: the dispatcher's poke (eventfd)
    detail::Dispatcher dispatcher_;           // awaited operations and their waiters
    std::uint32_t ticks_ = 0;                 // dispatch() calls, for its rates
    Gate gate_;                               // MSG: admits peers not added
    PeerId waiting_;                          // wait(.., peer) and wait_for(op, peer): the peer waited on
    struct Watched {
        int fd;
        PeerId peer;
    };
    std::vector<Watched> watched_;            // watch(): descriptors whose close loses a peer
    Clock::time_point next_watch_{};
    Clock::time_point next_events_{};         // tend(): the event queue's next read
    std::atomic<std::uintptr_t> user_{0};     // the thread inside the Node (Use), 0: none
    std::atomic<bool> retired_flag_{false};   // retired_ holds peers to remove
    std::mutex retired_mutex_;
    std::vector<PeerId> retired_;
    // MSG: connections closed by drop() or a port clash, kept (closed) so that
    // an Endpoint& taken from endpoint() before stays valid: its calls throw
    // UsageError, never touch freed memory. The last max_closed_kept.
    std::vector<std::shared_ptr<Endpoint>> closed_;
    static constexpr std::size_t max_closed_kept = 64;
    void keep_closed(std::shared_ptr<Endpoint> ep);
    /// A refusal noted by drop() is thrown by a wait on the peer (idle) only
    /// after this long: first the waited operation's own completion (the
    /// provider cancels it with the connection) may bring it (Connection).
    static constexpr auto refusal_grace = std::chrono::milliseconds(200);
};

} // namespace weft

#include "weft/peers/detail/peer_entry.hpp"
#include "weft/peers/detail/node_data.hpp"
#include "weft/peers/detail/awaiters.hpp"
