// SPDX-License-Identifier: MIT
/// @brief weft's endpoint: an ActiveEndpoint (the fid_ep itself: open, bind,
/// enable, connect, accept), the per-peer state beside it (weft/peer_state.hpp:
/// receive slots, frame scratch, iWARP's credit window, the hello), and the
/// data path on them: RMA write and read, write-with-notify, send/receive,
/// inject, scatter-gather and atomics, with the same code on MSG and RDM
/// endpoints and on every provider.
///
/// Its completions go to a Completions (its own, or one shared with other
/// endpoints); poll() and the waits here are that object's.
///
/// Threading: one thread at a time uses an endpoint and its Completions (the
/// data path takes no locks). A weft progress thread, when running, only
/// calls CompletionQueue::progress() on the queue.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "weft/fabric/active_endpoint.hpp"
#include "weft/fabric/address_vector.hpp"
#include "weft/fabric/completion_queue.hpp"
#include "weft/fabric/completions.hpp"
#include "weft/base/deadline.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/event_queue.hpp"
#include "weft/fabric/memory_region.hpp"
#include "weft/fabric/detail/peer_state.hpp"
#include "weft/fabric/progress.hpp"
#include "weft/fabric/remote_region.hpp"
#include "weft/info/options.hpp"

namespace weft {

class Endpoint {
public:
    /// MSG, client side: connects to the address in `info` (dest_addr), sending
    /// `param` as connection data, and returns once connected.
    static std::shared_ptr<Endpoint> connect(std::shared_ptr<Domain> domain, const Info& info,
                                             const Options& options,
                                             std::span<const std::byte> param, Deadline deadline,
                                             std::shared_ptr<Completions> completions = {});
    /// MSG, server side: accepts a FI_CONNREQ event and returns once connected.
    static std::shared_ptr<Endpoint> accept(std::shared_ptr<Domain> domain,
                                            EventQueue::Event request, const Options& options,
                                            Deadline deadline);
    /// MSG, server side, without blocking: accepts the FI_CONNREQ (fi_accept)
    /// and returns; call accept_step() until it says the connection is up.
    static std::shared_ptr<Endpoint> begin_accept(std::shared_ptr<Domain> domain,
                                                  EventQueue::Event request,
                                                  const Options& options,
                                                  std::shared_ptr<Completions> completions = {});
    /// Takes what has arrived for a begin_accept() endpoint (FI_CONNECTED,
    /// the peer's hello) without blocking; true once connected and greeted.
    /// Throws when the connection failed.
    bool accept_step();
    /// RDM: an enabled endpoint with its own address vector.
    /// `framed`: notifications as a write and a framed message even where CQ
    /// data exists (a Node whose provider misnames notification sources and
    /// has no CQ-data bits to spare, as ofi_rxm over verbs).
    static std::shared_ptr<Endpoint> open_rdm(std::shared_ptr<Domain> domain,
                                              const Options& options,
                                              std::shared_ptr<Completions> completions = {},
                                              bool framed = false);
    /// A Node's MSG endpoint on the Node's queues, serving `peer`: then
    /// begin_connect() or begin_accept() (`info`: the FI_CONNREQ's); connected()
    /// on FI_CONNECTED; ready() once both hellos (carrying each side's PeerId) are through.
    static std::shared_ptr<Endpoint> open_msg(std::shared_ptr<Domain> domain, Info info,
                                              const Options& options,
                                              std::shared_ptr<EventQueue> eq,
                                              std::shared_ptr<Completions> completions,
                                              PeerId peer);
    void begin_connect(std::span<const std::byte> param);
    void begin_accept();
    void connected();
    /// An initiator still waiting for the acceptor's hello sends a nudge when one
    /// is due (Quirks::first_message_can_stall); call while the connection is pending.
    void nudge_if_due();
    bool ready() const noexcept { return hello_.connected && !hello_.awaiting && !hello_.due; }
    /// MSG: FI_CONNECTED arrived (the connection was up at some point).
    bool was_connected() const noexcept { return hello_.connected; }
    /// A Node's RDM endpoint whose provider misnames sources: every notification (and,
    /// with `messages`, every message) carries `tag` in its CQ data's upper 32 bits.
    void tag_sender(std::uint32_t tag, bool messages) noexcept
    {
        notify_bits_ = std::uint64_t{tag} << 32;
        send_bits_ = messages ? notify_bits_ : 0;
    }
    PeerId peer() const noexcept { return peer_; }
    /// A Completions for `endpoints` endpoints like those `options` opens on `domain`.
    static std::shared_ptr<Completions> completions_for(const std::shared_ptr<Domain>& domain,
                                                        const Options& options,
                                                        std::size_t endpoints);
    ~Endpoint();
    Endpoint(const Endpoint&) = delete;
    Endpoint& operator=(const Endpoint&) = delete;

    /// This endpoint's address (fi_getname), to hand to a peer.
    std::vector<std::byte> name() const;
    /// RDM: makes a peer's address usable for posting.
    Peer insert_peer(std::span<const std::byte> peer_name);

    EndpointKind kind() const noexcept { return kind_; }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    const Info& info() const noexcept { return domain_->info(); }
    const Quirks& quirks() const noexcept { return quirks_; }
    std::string_view provider() const noexcept { return domain_->provider(); }
    fid_ep* get() const noexcept { return ep_.get(); }

    /// Largest message send() accepts (the receive slot size).
    std::size_t max_message() const noexcept { return max_message_; }
    /// Largest single RMA transfer (max_msg_size); larger ones are refused (-FI_EMSGSIZE).
    std::size_t max_transfer() const noexcept { return max_transfer_; }

    /// Closes the endpoint now (stopping its progress thread): later posts,
    /// polls and waits throw UsageError naming the cause; operations in flight
    /// are abandoned (their completions are not reported). Idempotent.
    /// A Node's RDM endpoint that carries more than one peer's traffic (a
    /// Server's connections share it) refuses with UsageError: closing it
    /// would end every peer. End one peer by destroying its Connection (or
    /// Node::remove_peer); all of them by destroying the Server or Node.
    void close();
    bool closed() const noexcept { return ep_.closed(); }
    /// The Node's RDM endpoint: how many live peers it carries (Node keeps
    /// the count; close() refuses above one).
    void set_sharers(std::uint32_t n) noexcept { sharers_ = n; }
    /// Endpoints closed without closing their libfabric objects: their progress
    /// thread stayed stuck in the provider (ProgressThread::stop; told on stderr).
    static std::size_t abandoned() noexcept { return ActiveEndpoint::abandoned(); }
    /// True when write_notify uses fi_writedata; false: a write, then a message (iWARP).
    bool notify_uses_cq_data() const noexcept { return !framed_; }
    /// The last write posted (write, write_notify): what a Node names when the target's provider
    /// refuses an access by closing the connection (tcp's write completes on send: never says).
    struct LastWrite {
        RemoteRegion region;
        std::uint64_t offset = 0;
        std::uint64_t len = 0;
    };
    const LastWrite& last_write() const noexcept { return last_write_; }
    std::uint64_t writes_posted() const noexcept { return writes_posted_; } ///< RMA writes, ever
    /// True when a notification takes a target's receive slot (FI_RX_CQ_DATA on verbs;
    /// framed on iWARP): it takes Options::rx_slots before it polls; a writer waits.
    bool notify_needs_receive() const noexcept { return framed_ || rx_cq_data_; }
    bool supports_atomics() const noexcept { return atomics_; }
    /// Credit-based flow control (iWARP): the peer's receive slots, the messages sent (with
    /// weft's nudges, sent while its hello was late), the slots handed back; 0 without.
    struct Credits {
        std::uint64_t peer_slots, sent, returned, nudges;
    };
    Credits credits() const noexcept;
    bool progress_thread() const noexcept { return q_->progress_thread(); }
    /// How often the progress thread had to drive this idle endpoint (0 without one).
    std::uint64_t progress_drives() const noexcept { return q_->progress_drives(); }
    /// Where this endpoint's completions go.
    Completions& completions() const noexcept { return *q_; }

    // ---- data path. Each post throws UsageError before any traffic when the
    // remote range is out of bounds or lacks the access, and retries
    // -FI_EAGAIN (progressing) until the post deadline. A zero-length RMA read
    // or write posts nothing and completes at once (providers disagree about
    // them); a zero-length write_notify or send is delivered. ----

    /// RMA write of `src` to `dst` at `offset`. Writes up to inject_size() go
    /// inline (fi_inject_write); weft then reports their completion itself.
    void write(Local src, const RemoteRegion& dst, std::uint64_t offset, void* context,
               Peer peer = {});
    /// One write of a batch: `src` to the batch's RemoteRegion at `offset`.
    struct Write {
        Local src;
        std::uint64_t offset;
    };
    /// Posts `writes` as one chain (FI_MORE on all but the last, so the provider
    /// may ring its doorbell once) and asks for a completion, carrying `context`,
    /// only on every `signal_every`-th write and the last (0 = the last only).
    /// Returns how many completions to expect. Every range is checked first:
    /// nothing is posted when one is bad.
    std::size_t write_batch(std::span<const Write> writes, const RemoteRegion& dst, void* context,
                            std::size_t signal_every = 0, Peer peer = {});
    /// Gathers `src` (at most rma_iov_limit entries) into one remote range.
    void writev(std::span<const Local> src, const RemoteRegion& dst, std::uint64_t offset,
                void* context, Peer peer = {});
    /// RMA write that also raises an Op::notify completion carrying `value` at
    /// the target, after the data is in place. One write_notify is exactly one
    /// notification at the target, on every provider.
    void write_notify(Local src, const RemoteRegion& dst, std::uint64_t offset,
                      std::uint32_t value, void* context, Peer peer = {});
    /// RMA read of `src` at `offset` into `dst`.
    void read(Local dst, const RemoteRegion& src, std::uint64_t offset, void* context,
              Peer peer = {});
    /// Scatters one remote range into `dst` (at most iov_limit entries).
    void readv(std::span<const Local> dst, const RemoteRegion& src, std::uint64_t offset,
               void* context, Peer peer = {});
    /// One range of read_ranges(): the RemoteRegion's bytes at `offset` into `dst`.
    struct Read {
        Local dst;
        std::uint64_t offset;
    };
    /// Reads several ranges of one remote region, each into its own local range,
    /// as one operation: one fi_readmsg, one completion carrying `context`. Where
    /// the provider takes them in one request (tcp: one message each way) this
    /// costs about what one read does; on shm it waits for the target's progress
    /// instead (Quirks::ranges_wait_for_target). At most read_ranges_limit()
    /// ranges; every range is checked before anything is posted.
    void read_ranges(std::span<const Read> reads, const RemoteRegion& src, void* context,
                     Peer peer = {});
    /// Most ranges read_ranges() takes here (1 on verbs: one remote range a read).
    std::size_t read_ranges_limit() const noexcept;
    /// Fire-and-forget write of at most inject_size() bytes from any memory: no completion.
    void write_inject(std::span<const std::byte> src, const RemoteRegion& dst,
                      std::uint64_t offset, Peer peer = {});
    /// write()'s inject without its completion; false, posting nothing, above inject_size().
    bool write_injected(Local src, const RemoteRegion& dst, std::uint64_t offset, Peer peer = {});
    std::size_t inject_size() const noexcept { return inject_size_; }
    /// Most local segments writev() gathers from / readv() scatters into.
    std::size_t write_iov_limit() const noexcept { return iov_limit_; }
    std::size_t read_iov_limit() const noexcept;

    /// Sends a message (at most max_message() bytes) into the peer's receive slots.
    void send(Local src, void* context, Peer peer = {});
    /// A notification with a payload (at most max_message() - 8 bytes): an
    /// Op::notify at the target carrying `value` and, as Completion::message,
    /// the payload. A message, so it is ordered behind earlier writes only
    /// where orders_sends_after_writes(); else send it once they completed.
    void send_note(std::uint32_t value, Local payload, void* context, Peer peer = {});
    /// An RMA write whose completion means the data is at the target (FI_DELIVERY_COMPLETE).
    void write_delivered(Local src, const RemoteRegion& dst, std::uint64_t offset, void* context,
                         Peer peer = {});
    /// A write with more to follow at once (FI_MORE: held until a post without, or a full queue).
    void write_more(Local src, const RemoteRegion& dst, std::uint64_t offset, void* context,
                    Peer peer = {});
    /// msg_order: writes land in posted order (WAW); a send is not delivered before them (SAW).
    bool orders_writes() const noexcept { return ordered_waw_; }
    bool orders_sends_after_writes() const noexcept { return ordered_saw_; }

    /// 64-bit remote atomics (where the provider offers FI_ATOMIC): the old value
    /// lands in `result` (8 bytes, registered).
    void fetch_add(Local result, const RemoteRegion& dst, std::uint64_t offset,
                   std::uint64_t operand, void* context, Peer peer = {});
    void compare_swap(Local result, const RemoteRegion& dst, std::uint64_t offset,
                      std::uint64_t expected, std::uint64_t desired, void* context,
                      Peer peer = {});

    // ---- completions ----

    /// Completions::poll / wait / wait_for of this endpoint's queue (shared
    /// with the other endpoints bound to it); UsageError once closed.
    std::size_t poll(std::span<Completion> out);
    std::optional<Completion> poll_one();
    Completion wait(void* context, Deadline deadline);
    Completion wait_for(Op op, Deadline deadline);
    /// Drives provider progress without taking completions (MANUAL providers).
    void progress() noexcept { q_->progress(); }

    /// Returns once every write completed to `peer` is in its memory, seen by its
    /// CPU and any later message on any channel: a one-byte read of `readable`
    /// (remote-read), ordered behind them (docs/memory.md: what a completion
    /// means). Other completions meanwhile are kept for later polls.
    void flush(const RemoteRegion& readable, Peer peer, Deadline deadline);

    /// How long a post keeps retrying -FI_EAGAIN before TimeoutError.
    void set_post_timeout(Clock::duration d) noexcept { post_timeout_ = d; }

    /// Asked now and then while a post retries -FI_EAGAIN: whether its
    /// destination (`dest`, FI_ADDR_UNSPEC on a connected endpoint) is known
    /// to be gone, and why (nullptr while it is not). A Node sets one, so
    /// that a post to a peer whose side channel closed fails within
    /// milliseconds with Error::peer_lost() instead of at the post timeout.
    using GoneCheck = const std::string* (*)(void* owner, const Endpoint& ep, fi_addr_t dest);
    void set_gone_check(GoneCheck check, void* owner) noexcept
    {
        gone_check_ = check;
        gone_owner_ = owner;
    }

    struct Private;
    Endpoint(Private, std::shared_ptr<Domain> domain, const Options& options, EndpointKind kind);

private:
    static constexpr std::size_t max_iov = 16; // segments writev/readv/read_ranges take at most
    friend class Completions; // hands slot and fence completions to their endpoint

    static std::shared_ptr<Endpoint> create(std::shared_ptr<Domain> domain, const Options& options,
                                            EndpointKind kind);
    void open_fid(Info info);
    void bind_and_enable(const std::shared_ptr<EventQueue>& eq,
                         std::shared_ptr<Completions> completions);
    void post_slots();
    void repost(std::uint32_t slot);
    /// After a drain: credits to hand back, a hello to answer.
    void follow_up();
    void need_follow_up();
    void abandon(const std::string& why) noexcept;
    void close_now() noexcept;
    void check_message(std::size_t len) const;
    void* internal_ctx() noexcept { return &tags_[0]; }
    void* fence_ctx() noexcept { return &tags_[1]; }

    /// Posts with libfabric's `Fn` (fi_write, fi_inject_write, ...) on the endpoint:
    /// one call and a compare; -FI_EAGAIN and errors go out of line. `dest` is
    /// the peer's address among `args` (FI_ADDR_UNSPEC when connected), for
    /// the gone check while -FI_EAGAIN is retried.
    template <auto Fn, class... A>
    void post(const char* call, fi_addr_t dest, A... args);
    template <auto Fn, class... A>
    [[gnu::noinline, gnu::cold]] void post_retry(const char* call, fi_addr_t dest, ssize_t first,
                                                 A... args);
    void post_slow(const char* call, fi_addr_t dest, ssize_t first, ssize_t (*retry)(void*),
                   void* arg);

    /// A receive slot's completion (Completions::translate): the hello, a
    /// framed notification or message, or a plain message.
    bool received(const detail::Tag& tag, const fi_cq_data_entry& e, Completion& c);
    void complete_locally(Op op, void* context, std::size_t len)
    {
        q_->defer(Completion{.context = context, .op = op, .len = len});
    }
    void write_flagged(Local src, const RemoteRegion& dst, std::uint64_t offset, void* context,
                       Peer peer, std::uint64_t flags); // write_delivered's, write_more's
    void write_notify_framed(Local src, std::uint64_t addr, std::uint64_t key,
                             std::uint32_t value, void* context, Peer peer);
    void flush_before_read(const RemoteRegion& src, std::uint64_t offset, Peer peer);
    /// readv's and read_ranges' post, once the sinks are kept: the flush a
    /// queued write needs first (Quirks::reads_overtake_queued_writes), then fi_readmsg.
    void post_readmsg(const fi_msg_rma& msg, const RemoteRegion& src, std::uint64_t offset, Peer peer);
    void await_fence(Deadline deadline, const char* what);
    void expect_hello(Deadline deadline, bool initiator);
    void send_hello();
    bool accept_hello(const std::byte* payload, std::size_t len);
    void post_recv(std::uint32_t slot);
    void take_credit();
    void grant_credits();
    void send_frame(std::uint8_t type, std::uint32_t value, Local payload, void* context,
                    Peer peer);
    [[noreturn]] void unsupported(const char* what) const;
    [[noreturn]] void closed_error(const char* call) const;
    [[noreturn]] void inject_too_big(std::size_t len) const;
    /// Zero bytes (true: completed locally) or more than max_msg_size (throws).
    bool odd_length(const char* call, Op op, std::size_t len, void* context);

    std::shared_ptr<Domain> domain_;
    Options options_;
    EndpointKind kind_;
    Quirks quirks_;
    std::shared_ptr<Completions> completions_;
    Completions* q_ = nullptr;        // completions_.get(): the fast path's one load
    std::span<detail::Tag> tags_;     // [0] internal, [1] fence, then one per receive slot
    std::shared_ptr<EventQueue> eq_;     // MSG
    std::shared_ptr<AddressVector> av_;  // RDM
    std::size_t max_message_ = 0;
    std::size_t max_transfer_ = SIZE_MAX;
    std::size_t inject_size_ = 0;
    std::size_t rma_iov_limit_ = 1;
    std::size_t iov_limit_ = 1;
    std::uint32_t sharers_ = 0;  // a Node's RDM endpoint: the live peers it carries
    bool framed_ = false;        // messages carry a header; notify is a message
    bool rx_cq_data_ = false;    // FI_RX_CQ_DATA: CQ data takes a posted receive
    bool ordered_saw_ = false;   // send after write is ordered
    bool ordered_waw_ = false;   // write after write is ordered
    bool atomics_ = false;
    Clock::duration post_timeout_ = std::chrono::seconds(10);
    GoneCheck gone_check_ = nullptr;
    void* gone_owner_ = nullptr;
    bool fence_done_ = false;
    // Quirks::reads_overtake_queued_writes: a queued (injected) write_notify
    // notes its peer, a flush to that peer forgets it; a read to a noted peer
    // flushes first. Per peer: an RDM endpoint serves many, and a flush to one
    // says nothing of the others.
    bool queue_bypassing_reads_ = false;
    std::vector<fi_addr_t> unflushed_peers_;
    LastWrite last_write_;
    std::uint64_t writes_posted_ = 0; // a Node's same-host lane flushes them before it reads
    bool unflushed(fi_addr_t peer) const noexcept;
    bool granting_ = false;         // grant_credits() is posting (and may come back)
    bool follow_up_queued_ = false; // in Completions::follow_ups_
    // ---- per-peer state (weft/peer_state.hpp) ----
    detail::ReceiveSlots slots_;
    detail::Scratch scratch_;
    detail::CreditWindow credits_; // on where a message without a receive is fatal (iWARP)
    detail::Handshake hello_;
    PeerId peer_;                   // the Node's id of the peer this endpoint serves
    std::uint64_t notify_bits_ = 0; // the peer's id of this side, in notifications' CQ data
    std::uint64_t send_bits_ = 0;   // the same in messages' CQ data (fi_senddata)

    ActiveEndpoint ep_; // last: closed first, before what it is bound to
};

} // namespace weft

#include "weft/fabric/detail/endpoint.inl"
