// SPDX-License-Identifier: MIT
/// @brief An active endpoint (fi_endpoint) and weft's data path: RMA write and
/// read, write-with-notify, send/receive, inject, scatter-gather and atomics,
/// with the same code on MSG and RDM endpoints and on every provider.
///
/// Threading: one thread at a time uses an endpoint (the data path takes no
/// locks). A weft progress thread, when running, only calls
/// CompletionQueue::progress() on the endpoint's queue.
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

#include "weft/address_vector.hpp"
#include "weft/completion_queue.hpp"
#include "weft/deadline.hpp"
#include "weft/domain.hpp"
#include "weft/error.hpp"
#include "weft/event_queue.hpp"
#include "weft/memory_region.hpp"
#include "weft/progress.hpp"
#include "weft/remote_region.hpp"
#include "weft/ring.hpp"
#include "weft/select.hpp"

namespace weft {

/// What a completion reports.
enum class Op : std::uint8_t {
    send,   ///< a send finished locally (its buffer may be reused)
    recv,   ///< a message arrived: Completion::message
    write,  ///< an RMA write (or write_notify) finished locally
    read,   ///< an RMA read finished: the data is in the local sink
    atomic, ///< a fetch_add / compare_swap finished: the old value is in the result
    notify, ///< a peer's write_notify landed here: Completion::data is its value
};
std::string_view to_string(Op op) noexcept;

namespace detail {
/// The Op of a completion, from its libfabric flags.
constexpr Op op_from_flags(std::uint64_t flags) noexcept
{
    if (flags & FI_ATOMIC)
        return Op::atomic;
    if (flags & FI_RMA)
        return (flags & FI_READ) ? Op::read : Op::write;
    if (flags & FI_RECV)
        return Op::recv;
    return Op::send;
}
} // namespace detail

struct Completion {
    void* context = nullptr; ///< as given when posting; nullptr for recv and notify
    Op op = Op::send;
    /// Bytes moved by this side's operation, or received (recv). 0 for a
    /// notification on every provider (some report the written length, others
    /// cannot): carry a length in the notification's value if the target needs it.
    std::size_t len = 0;
    std::uint32_t data = 0; ///< notify: the 32-bit value the writer attached
    /// recv: the payload, valid until the next poll / wait call on this endpoint.
    std::span<const std::byte> message;
    std::uint32_t slot = no_slot; ///< internal: the receive slot lent out
    static constexpr std::uint32_t no_slot = ~0u;
};

class Endpoint {
public:
    /// MSG, client side: connects to the address in `info` (dest_addr), sending
    /// `param` as connection data, and returns once connected.
    static std::shared_ptr<Endpoint> connect(std::shared_ptr<Domain> domain, const Info& info,
                                             const Options& options,
                                             std::span<const std::byte> param, Deadline deadline);
    /// MSG, server side: accepts a FI_CONNREQ event and returns once connected.
    static std::shared_ptr<Endpoint> accept(std::shared_ptr<Domain> domain,
                                            EventQueue::Event request, const Options& options,
                                            Deadline deadline);
    /// MSG, server side, without blocking: accepts the FI_CONNREQ (fi_accept)
    /// and returns; call accept_step() until it says the connection is up.
    static std::shared_ptr<Endpoint> begin_accept(std::shared_ptr<Domain> domain,
                                                  EventQueue::Event request,
                                                  const Options& options);
    /// Takes what has arrived for a begin_accept() endpoint (FI_CONNECTED,
    /// the peer's hello) without blocking; true once connected and greeted.
    /// Throws when the connection failed.
    bool accept_step();
    /// RDM: an enabled endpoint with its own address vector.
    static std::shared_ptr<Endpoint> open_rdm(std::shared_ptr<Domain> domain,
                                              const Options& options);
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
    fid_ep* get() const noexcept { return ep_; }

    /// Largest message send() accepts (the receive slot size).
    std::size_t max_message() const noexcept { return max_message_; }
    /// Largest single RMA transfer (the provider's max_msg_size); larger ones
    /// are refused with -FI_EMSGSIZE before posting.
    std::size_t max_transfer() const noexcept { return max_transfer_; }

    /// Closes the endpoint now (stopping its progress thread): later posts,
    /// polls and waits throw UsageError naming the cause; operations in flight
    /// are abandoned (their completions are not reported). Idempotent.
    void close() noexcept;
    bool closed() const noexcept { return ep_ == nullptr; }
    /// Endpoints in this process closed without closing their libfabric
    /// objects, because their progress thread stayed stuck inside the provider
    /// (see ProgressThread::stop); each was also reported on stderr.
    static std::size_t abandoned() noexcept;
    /// True when write_notify uses fi_writedata; false when it falls back to a
    /// write followed by a message (cq_data_size is 0, as on iWARP).
    bool notify_uses_cq_data() const noexcept { return !framed_; }
    bool supports_atomics() const noexcept { return atomics_; }
    /// With credit-based flow control (iWARP): the peer's receive slots, the
    /// messages sent so far and the slots the peer has handed back. All 0 without.
    struct Credits {
        std::uint64_t peer_slots, sent, returned;
    };
    Credits credits() const noexcept;
    bool progress_thread() const noexcept { return progress_ != nullptr; }
    /// How often the progress thread had to drive this idle endpoint (0 without one).
    std::uint64_t progress_drives() const noexcept { return progress_ ? progress_->drives() : 0; }

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
    /// Fire-and-forget write of at most inject_size() bytes from any memory: no
    /// completion, the buffer is reusable on return.
    void write_inject(std::span<const std::byte> src, const RemoteRegion& dst,
                      std::uint64_t offset, Peer peer = {});
    std::size_t inject_size() const noexcept { return inject_size_; }
    /// Most local segments writev() gathers from / readv() scatters into.
    std::size_t write_iov_limit() const noexcept { return iov_limit_; }
    std::size_t read_iov_limit() const noexcept
    {
        return quirks_.max_read_iov ? std::min(iov_limit_, quirks_.max_read_iov) : iov_limit_;
    }

    /// Sends a message (at most max_message() bytes) into the peer's receive slots.
    void send(Local src, void* context, Peer peer = {});

    /// 64-bit remote atomics (where the provider offers FI_ATOMIC): the old value
    /// lands in `result` (8 bytes, registered).
    void fetch_add(Local result, const RemoteRegion& dst, std::uint64_t offset,
                   std::uint64_t operand, void* context, Peer peer = {});
    void compare_swap(Local result, const RemoteRegion& dst, std::uint64_t offset,
                      std::uint64_t expected, std::uint64_t desired, void* context,
                      Peer peer = {});

    // ---- completions ----

    /// Non-blocking: fills `out` with ready completions, returns how many.
    std::size_t poll(std::span<Completion> out);
    std::optional<Completion> poll_one();
    /// Waits for the completion of the operation posted with `context`; others
    /// that arrive meanwhile are kept for later polls.
    Completion wait(void* context, Deadline deadline);
    /// Waits for the next completion of kind `op` (e.g. Op::notify, Op::recv).
    Completion wait_for(Op op, Deadline deadline);
    /// Drives provider progress without taking completions (MANUAL providers).
    void progress() noexcept { cq_->progress(); }

    /// Returns once every write this endpoint has completed to `peer` is in the
    /// peer's memory, where the peer's CPU, and any later message on any
    /// channel, sees it: an RMA read of one byte of `readable` (a region of the
    /// peer's with remote-read access), ordered behind those writes, waited for
    /// here. A write's completion alone promises that much only to a read or a
    /// notification that follows on this endpoint (README: what a completion
    /// means); Connection::barrier() flushes both ways. Other completions that
    /// arrive meanwhile are kept for later polls.
    void flush(const RemoteRegion& readable, Peer peer, Deadline deadline);

    /// How long a post keeps retrying -FI_EAGAIN before TimeoutError.
    void set_post_timeout(Clock::duration d) noexcept { post_timeout_ = d; }

    struct Private;
    Endpoint(Private, std::shared_ptr<Domain> domain, const Options& options, EndpointKind kind);

private:
    struct Slot {
        std::byte* buf;
    };
    struct AtomicScratch {
        std::uint64_t operand;
        std::uint64_t compare;
    };

    void open_fid(Info info);
    void bind_and_enable(const std::shared_ptr<EventQueue>& eq);
    void post_slots();
    void repost(std::uint32_t slot);
    void repost_lent();
    void start_progress_thread();
    void abandon() noexcept;
    void check_message(std::size_t len) const;

    /// Posts with libfabric's `Fn` (fi_write, fi_inject_write, ...) on ep_:
    /// one call and a compare; -FI_EAGAIN and errors go out of line.
    template <auto Fn, class... A>
    void post(const char* call, A... args);
    template <auto Fn, class... A>
    [[gnu::noinline, gnu::cold]] void post_retry(const char* call, ssize_t first, A... args);
    void post_slow(const char* call, ssize_t first, ssize_t (*retry)(void*), void* arg);

    static constexpr std::size_t poll_batch = 16;
    /// Waits read the clock once per this many + 1 empty polls: a clock read is
    /// a system call where the clock source has no vDSO (the lab's TCG guest,
    /// ~25 us), and a fast poll takes ~0.1 us here, so ~0.1 ms between checks.
    static constexpr std::uint32_t clock_every = 1023;
    /// The fast paths' precondition: open, nothing lent out, no credit flow
    /// control (whose grants ride on every drain).
    bool plain() const noexcept { return ep_ != nullptr && lent_.empty() && !credits_; }
    bool holds(Op op) noexcept
    {
        for (std::size_t i = 0; i < deferred_.size(); ++i)
            if (deferred_[i].op == op)
                return true;
        return false;
    }
    template <class Accept>
    std::optional<Completion> spin_one(Accept&& accept, Deadline deadline);
    std::size_t drain(std::span<Completion> out);
    std::size_t translate_all(const fi_cq_data_entry* entries, std::size_t n,
                              std::span<Completion> out);
    std::size_t lend(std::span<const Completion> taken);
    std::size_t take_entries(const fi_cq_data_entry* entries, std::size_t n,
                             std::span<Completion> out);
    std::size_t poll_slow(std::span<Completion> out);
    bool translate(const fi_cq_data_entry& e, Completion& c);
    template <class Pred>
    Completion wait_until(Pred&& pred, Deadline deadline, const char* what);
    void stash_some();
    void keep_source(const Local& l)
    {
        if (l.region != last_source_) [[unlikely]]
            keep_slow(l.region, false);
    }
    void keep_sink(const Local& l)
    {
        if (l.region != last_sink_) [[unlikely]]
            keep_slow(l.region, true);
    }
    void keep_slow(const MemoryRegion* region, bool sink);
    void release_idle() noexcept;
    /// cq_->read, counting a failed operation of the caller's as completed.
    std::size_t read_cq(fi_cq_data_entry* entries, std::size_t n)
    {
        try {
            return cq_->read(entries, n);
        } catch (const Error& e) {
            failed(e.context());
            throw;
        }
    }
    void failed(void* context) noexcept;
    bool ours(const void* ctx) const noexcept;
    void complete_locally(Op op, void* context, std::size_t len)
    {
        deferred_.push_back(Completion{context, op, len, 0, {}});
    }
    Completion wait_slow(void* context, Deadline deadline);
    void flush_before_read(const RemoteRegion& src, std::uint64_t offset, Peer peer);
    void await_fence(Deadline deadline, const char* what);
    Completion wait_for_slow(Op op, Deadline deadline);
    void write_notify_framed(Local src, std::uint64_t addr, std::uint64_t key,
                             std::uint32_t value, void* context, Peer peer);
    void expect_hello(Deadline deadline, bool initiator);
    void send_hello();
    bool accept_hello(const std::byte* payload, std::size_t len);
    void post_recv(std::uint32_t slot);
    void take_credit();
    void grant_credits();
    AtomicScratch* next_scratch() noexcept;
    void send_frame(std::uint8_t type, std::uint32_t value, Local payload, void* context,
                    Peer peer);
    [[noreturn]] void unsupported(const char* what) const;
    [[noreturn]] void closed_error(const char* call) const;
    [[noreturn]] void wait_timeout(const char* what, bool late) const;
    [[noreturn]] void inject_too_big(std::size_t len) const;
    /// Zero bytes (true: completed locally) or more than max_msg_size (throws).
    bool odd_length(const char* call, Op op, std::size_t len, void* context);

    std::shared_ptr<Domain> domain_;
    std::optional<Info> ep_info_; // providers may keep pointers into it: lives as long as ep_
    Options options_;
    EndpointKind kind_;
    Quirks quirks_;
    std::shared_ptr<CompletionQueue> cq_;
    std::shared_ptr<EventQueue> eq_;     // MSG
    std::shared_ptr<AddressVector> av_;  // RDM
    std::shared_ptr<MemoryRegion> slot_mr_;    // receive slots
    std::shared_ptr<MemoryRegion> scratch_mr_; // frame headers and atomic operands
    std::vector<Slot> slots_;
    std::vector<std::uint32_t> lent_;  // slots handed to the caller, reposted on the next poll
    detail::Ring<Completion> deferred_; // read while waiting for something else, or synthesized
    std::array<Completion, 16> waiting_{}; // wait()'s batch: not re-initialised on every spin
    std::size_t slot_size_ = 0;
    std::size_t max_message_ = 0;
    std::size_t max_transfer_ = SIZE_MAX;
    std::size_t inject_size_ = 0;
    std::size_t rma_iov_limit_ = 1;
    std::size_t iov_limit_ = 1;
    std::size_t scratch_count_ = 0;
    std::size_t scratch_next_ = 0;
    bool framed_ = false;        // messages carry a header; notify is a message
    bool ordered_saw_ = false;   // send after write is ordered
    bool atomics_ = false;
    bool selective_ = false;     // FI_SELECTIVE_COMPLETION: unsignaled writes complete silently
    Clock::duration post_timeout_ = std::chrono::seconds(10);
    bool awaiting_hello_ = false; // MSG server: the first message must be weft's hello
    bool connected_ = false;      // MSG server: FI_CONNECTED arrived
    bool spun_out_ = false;       // spin_one returned because the deadline passed
    bool fence_done_ = false;
    // Quirks::reads_overtake_queued_writes: set by a queued (injected)
    // write_notify, cleared by a flush; reads flush first while it is set.
    bool queue_bypassing_reads_ = false;
    bool unflushed_ = false;
    // Flow control where a message finding no posted receive is fatal (iWARP):
    // the peer tells us, by RMA write into control_mr_, how many receives it
    // has reposted; we send only while sent_ < peer_slots_ + that count.
    bool credits_ = false;
    bool granting_ = false;
    std::shared_ptr<MemoryRegion> control_mr_; // [0,8) written by the peer; [8,64) hello staging
    RemoteRegion peer_credit_;
    std::uint64_t peer_slots_ = 0;
    std::uint64_t sent_ = 0;
    std::uint64_t reposted_ = 0;
    std::uint64_t granted_ = 0;
    // Regions that posted operations use (Local::region), held until no
    // operation is in flight and the caller has dropped them (release_idle):
    // freeing a region under a pending read would let the provider write into
    // freed memory. One cached region per role keeps the fast path one compare.
    std::vector<std::shared_ptr<const MemoryRegion>> held_;
    const MemoryRegion* last_source_ = nullptr;
    const MemoryRegion* last_sink_ = nullptr;
    std::int64_t in_flight_ = 0; // caller's operations posted and not yet completed
    Activity activity_;          // polls seen, so the progress thread can stay out of the way
    int internal_ = 0;           // its address marks weft's own operations
    int fence_ = 0;              // its address marks a write weft waits for itself
    detail::FidPtr<fid_ep> ep_owner_;
    fid_ep* ep_ = nullptr;
    std::unique_ptr<ProgressThread> progress_; // stopped first: declared last
};

// ---- The data path's fast paths, inline like libfabric's own fi_write():
// the call into libweft.so and its register spills cost more than weft's
// checks. Everything unusual (back-pressure, errors, odd lengths, completions
// that are not the awaited one) is out of line in src/endpoint_data.cpp. ----

// The call is a template argument and its arguments plain values, not a
// lambda: a closure is an object the compiler builds in memory before the call
// (a retry needs it again), ~12 stores per post; plain arguments stay in
// registers and are only spilled on the cold path.
template <auto Fn, class... A>
void Endpoint::post_retry(const char* call, ssize_t first, A... args)
{
    auto again = [&] { return Fn(ep_, args...); };
    using Again = decltype(again);
    post_slow(call, first, [](void* p) -> ssize_t { return (*static_cast<Again*>(p))(); },
              &again);
}

template <auto Fn, class... A>
[[gnu::always_inline]] inline void Endpoint::post(const char* call, A... args)
{
    if (ep_ == nullptr) [[unlikely]]
        closed_error(call);
    const ssize_t r = Fn(ep_, args...);
    if (r != 0) [[unlikely]]
        post_retry<Fn>(call, r, args...);
}

inline void Endpoint::write(Local src, const RemoteRegion& dst, std::uint64_t offset,
                            void* context, Peer peer)
{
    const std::uint64_t addr = dst.write_address(offset, src.len);
    if (src.len - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("write", Op::write, src.len, context))
            return;
    if (src.len <= inject_size_) {
        post<fi_inject_write>("fi_inject_write", src.addr, src.len, peer.addr, addr, dst.key());
        complete_locally(Op::write, context, src.len);
        return;
    }
    keep_source(src);
    post<fi_write>("fi_write", src.addr, src.len, src.desc, peer.addr, addr, dst.key(), context);
    ++in_flight_;
}

inline void Endpoint::read(Local dst, const RemoteRegion& src, std::uint64_t offset,
                           void* context, Peer peer)
{
    const std::uint64_t addr = src.read_address(offset, dst.len);
    if (dst.len - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("read", Op::read, dst.len, context))
            return;
    keep_sink(dst);
    if (unflushed_) [[unlikely]]
        flush_before_read(src, offset, peer);
    post<fi_read>("fi_read", dst.addr, dst.len, dst.desc, peer.addr, addr, src.key(), context);
    ++in_flight_;
}

inline void Endpoint::write_inject(std::span<const std::byte> src, const RemoteRegion& dst,
                                   std::uint64_t offset, Peer peer)
{
    if (src.size() > inject_size_) [[unlikely]]
        inject_too_big(src.size());
    const std::uint64_t addr = dst.write_address(offset, src.size());
    post<fi_inject_write>("fi_inject_write", src.data(), src.size(), peer.addr, addr, dst.key());
}

inline std::size_t Endpoint::poll(std::span<Completion> out)
{
    // Nothing held back: read the queue straight; an empty queue (a spinning
    // poller's usual answer) costs one compare more than fi_cq_read.
    if (deferred_.empty() && plain() && !out.empty()) [[likely]] {
        activity_.note();
        std::array<fi_cq_data_entry, poll_batch> entries;
        const std::size_t n = read_cq(entries.data(), std::min(poll_batch, out.size()));
        return n == 0 ? 0 : take_entries(entries.data(), n, out);
    }
    return poll_slow(out);
}

inline void Endpoint::write_notify(Local src, const RemoteRegion& dst, std::uint64_t offset,
                                   std::uint32_t value, void* context, Peer peer)
{
    const std::uint64_t addr = dst.write_address(offset, src.len);
    if (src.len > max_transfer_) [[unlikely]]
        (void)odd_length("write_notify", Op::write, src.len, context);
    if (framed_) [[unlikely]] { // no CQ data: a write and a message
        write_notify_framed(src, addr, dst.key(), value, context, peer);
        return;
    }
    if (src.len <= inject_size_) {
        post<fi_inject_writedata>("fi_inject_writedata", src.addr, src.len, value, peer.addr, addr,
                                  dst.key());
        complete_locally(Op::write, context, src.len);
        unflushed_ = queue_bypassing_reads_; // a read must not overtake it (Quirks)
        return;
    }
    keep_source(src);
    post<fi_writedata>("fi_writedata", src.addr, src.len, src.desc, value, peer.addr, addr,
                       dst.key(), context);
    ++in_flight_;
}

/// The waits' fast path: spins on the queue one entry at a time. The first
/// entry is returned as `accept` makes it, or kept for the slow path (which
/// also owns the deadline: nothing comes back once it passed).
template <class Accept>
[[gnu::always_inline]] inline std::optional<Completion> Endpoint::spin_one(Accept&& accept,
                                                                          Deadline deadline)
{
    for (std::uint32_t spins = 1;; ++spins) {
        activity_.note();
        fi_cq_data_entry e;
        if (read_cq(&e, 1) == 1) {
            if (std::optional<Completion> c = accept(e)) [[likely]]
                return c;
            Completion c;
            if (translate(e, c))
                deferred_.push_back(c); // the slow path finds it there
            return std::nullopt;
        }
        if ((spins & clock_every) == 0 && deadline.expired()) [[unlikely]] {
            spun_out_ = true; // the slow path tells this from a deadline passed on entry
            return std::nullopt;
        }
    }
}

inline Completion Endpoint::wait_for(Op op, Deadline deadline)
{
    // A notification and none held back: the next entry is usually it (a
    // write_notify ping-pong).
    if (op == Op::notify && plain() && !holds(Op::notify)) [[likely]] {
        const auto notify = [](const fi_cq_data_entry& e) -> std::optional<Completion> {
            if ((e.flags & FI_REMOTE_CQ_DATA) && e.op_context == nullptr)
                return Completion{nullptr, Op::notify, 0, static_cast<std::uint32_t>(e.data), {}};
            return std::nullopt;
        };
        if (auto c = spin_one(notify, deadline))
            return *c;
    }
    return wait_for_slow(op, deadline);
}

inline Completion Endpoint::wait(void* context, Deadline deadline)
{
    // An inject's completion, reported by weft itself, waits at the front.
    if (!deferred_.empty() && lent_.empty() && ep_ != nullptr && deferred_[0].context == context &&
        deferred_[0].op != Op::recv && deferred_[0].op != Op::notify)
        return deferred_.pop_front();
    // One operation in flight, the common case: nothing held back, and the
    // next entry is this one.
    if (deferred_.empty() && plain()) [[likely]] {
        const auto mine = [this, context](const fi_cq_data_entry& e) -> std::optional<Completion> {
            if (e.op_context == context && !(e.flags & (FI_REMOTE_WRITE | FI_RECV))) {
                --in_flight_;
                return Completion{context, detail::op_from_flags(e.flags), e.len, 0, {}};
            }
            return std::nullopt;
        };
        if (auto c = spin_one(mine, deadline))
            return *c;
    }
    return wait_slow(context, deadline);
}

} // namespace weft
