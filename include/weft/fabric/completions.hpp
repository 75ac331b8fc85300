// SPDX-License-Identifier: MIT
/// @brief What one completion queue reports, for the endpoints bound to it:
/// polling, waiting for one operation or for the next of a kind, and keeping
/// what arrives meanwhile.
///
/// Several endpoints may share one Completions (a Node's MSG endpoints do);
/// an endpoint opened on its own gets one of its own. The operations weft
/// posts itself (receive slots, hellos, credits, fences) carry a context from
/// this object's arena of tags, so one range check tells them from the
/// caller's contexts, and a tag names the endpoint it belongs to.
///
/// Threading: one thread at a time. A weft progress thread, when running,
/// only calls CompletionQueue::progress().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rdma/fi_eq.h>

#include "weft/fabric/completion.hpp"
#include "weft/fabric/completion_queue.hpp"
#include "weft/base/deadline.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/memory_region.hpp"
#include "weft/fabric/progress.hpp"
#include "weft/fabric/detail/completion_tag.hpp"
#include "weft/base/detail/ring.hpp"

namespace weft {

class Endpoint;
struct Options;

class Completions {
public:
    /// A queue of `cq_size` entries for up to `endpoints` endpoints with
    /// `slots` receive slots each. Where `options` and the domain's quirks
    /// want a progress thread, it starts once the first endpoint is enabled.
    static std::shared_ptr<Completions> open(std::shared_ptr<Domain> domain,
                                             const Options& options, std::size_t cq_size,
                                             std::size_t endpoints, std::size_t slots);
    ~Completions();
    Completions(const Completions&) = delete;
    Completions& operator=(const Completions&) = delete;

    /// Non-blocking: fills `out` with ready completions, returns how many.
    std::size_t poll(std::span<Completion> out);
    std::optional<Completion> poll_one();
    /// Waits for the completion of the operation posted with `context`; others
    /// that arrive meanwhile are kept for later polls.
    Completion wait(void* context, Deadline deadline);
    /// An awaiter's one look before it suspends (Node's co_await): `mine` when the
    /// next entry is `context`'s (in `out`), `none` when the queue is empty or other
    /// operations fly (no look), `other` when it read another (kept) or holds some
    /// back: Node::route() sorts them.
    enum class Look : std::uint8_t { none, mine, other };
    Look look_once(void* context, Completion& out);
    /// Waits for the next completion of kind `op` (e.g. Op::notify, Op::recv).
    Completion wait_for(Op op, Deadline deadline);
    /// The same, caused by `peer` (a Node's queue); others are kept for later.
    Completion wait_for(Op op, PeerId peer, Deadline deadline);
    /// Called now and then while a wait spins (a Node handles connection events).
    void on_idle(void (*hook)(void*), void* arg) noexcept
    {
        idle_hook_ = hook;
        idle_arg_ = arg;
    }
    /// Waiting::sleep: how a wait sleeps up to `ms` when nothing is pending
    /// (a Node also watches its event queue); by default on fd().
    void on_sleep(void (*hook)(void*, int ms), void* arg) noexcept
    {
        sleep_hook_ = hook;
        sleep_arg_ = arg;
    }
    /// Drives provider progress without taking completions (MANUAL providers).
    void progress() noexcept { cq_->progress(); }
    /// Waiting::sleep: the descriptor that turns readable when something
    /// arrives (-1 otherwise), and whether nothing is pending so the caller
    /// may sleep on it now (fi_trywait).
    int fd() const noexcept { return cq_->fd(); }
    /// Waiting::sleep: the 1 ms naps its waits took so far (two sleeps in a
    /// row that returned at once to nothing: a descriptor that does not hold).
    std::uint64_t naps() const noexcept { return naps_taken_; }
    bool trywait() noexcept
    {
        queue_due_ = true; // after a sleep (or a refusal to), the queue is read first
        return deferred_.empty() && lent_.empty() && (side_ == nullptr || side_->quiet()) &&
               cq_->trywait();
    }
    /// Completions from beside the queue, read with it from now on (one source);
    /// nullptr: none any more (what it lent is forgotten, never given back).
    void add_side(SideSource* side) noexcept;

    const std::shared_ptr<CompletionQueue>& queue() const noexcept { return cq_; }
    /// The caller's operations posted to the queue and not yet completed.
    std::int64_t in_flight() const noexcept { return in_flight_; }
    std::string_view provider() const noexcept { return cq_->domain()->provider(); }
    bool progress_thread() const noexcept { return progress_ != nullptr; }
    std::uint64_t progress_drives() const noexcept { return progress_ ? progress_->drives() : 0; }
    /// Stops the progress thread (the queue's last endpoint closes; the next
    /// one enabled starts another); false when it stayed stuck inside the
    /// provider (see ProgressThread::stop), after which nothing it may touch
    /// may be closed.
    bool stop_progress() noexcept;

    struct Private;
    Completions(Private, std::shared_ptr<CompletionQueue> cq, std::size_t endpoints,
                std::size_t slots);

private:
    friend class Endpoint;
    friend class Node; // names the peers of completions

    /// An endpoint bound to this queue is enabled: the progress thread may run.
    void endpoint_enabled();

    // ---- naming the peer of a completion (a Node's queue) ----
    /// RDM: read with fi_cq_readfrom and name peers by source address.
    void name_sources() noexcept { sources_ = true; }
    void source_is(fi_addr_t addr, PeerId peer);
    /// MSG: notifications carry the sender's PeerId here in the upper 32
    /// bits of their CQ data (each side tells the other its id in the hello).
    void notify_carries_peer() noexcept { notify_peer_bits_ = true; }
    /// RDM where sources are misnamed: notifications (and messages with
    /// `messages`) carry the sender's tag in their CQ data's upper bits.
    void senders_tagged(bool messages) noexcept
    {
        tagged_notify_ = true;
        tagged_messages_ = messages;
    }
    void tag_is(std::uint32_t tag, PeerId peer) { peer_of_tag_[tag] = peer; }
    /// Peers whose weft-internal operations failed since the last call, with why.
    std::vector<std::pair<PeerId, std::string>> take_broken() { return std::exchange(broken_, {}); }
    bool any_broken() const noexcept { return !broken_.empty(); }
    /// Forgets what `peer`'s endpoint reported before it was closed on purpose
    /// (Node::drop): its cancelled receives are not the next connection's.
    void forget_broken(PeerId peer)
    {
        std::erase_if(broken_, [&](const auto& b) { return b.first == peer; });
    }
    PeerId tagged_peer(std::uint64_t data) const
    {
        const auto it = peer_of_tag_.find(static_cast<std::uint32_t>(data >> 32));
        return it == peer_of_tag_.end() ? PeerId{} : it->second;
    }
    PeerId source_peer(fi_addr_t addr) const noexcept
    {
        return addr < peer_of_addr_.size() ? peer_of_addr_[addr] : PeerId{};
    }

    // ---- tags: the contexts of weft's own operations ----
    /// A block of tags for `owner`: [0] internal, [1] fence, then its slots.
    std::span<detail::Tag> attach(Endpoint* owner, std::size_t slots);
    void detach(std::span<detail::Tag> tags) noexcept;
    bool ours(const void* ctx) const noexcept
    {
        const auto p = reinterpret_cast<std::uintptr_t>(ctx);
        return p - tags_lo_ < tags_span_;
    }

    // ---- regions posted operations use, held until they complete ----
    /// A region not seen last, or any revocation since, is checked again
    /// (check_local) before the post.
    void keep_source(const Local& l)
    {
        if (l.region != last_source_ || MemoryRegion::revocations() != source_revocations_) [[unlikely]]
            keep_slow(l.region, false);
    }
    void keep_sink(const Local& l)
    {
        if (l.region != last_sink_ || MemoryRegion::revocations() != sink_revocations_) [[unlikely]]
            keep_slow(l.region, true);
    }
    void keep_slow(const MemoryRegion* region, bool sink);
    /// UsageError for a region this queue's operations cannot use: revoked,
    /// another domain's, or read-only memory as a sink.
    void check_local(const MemoryRegion& region, bool sink) const;
    void release_idle() noexcept;
    void release_all() noexcept;
    std::vector<std::shared_ptr<void>> held() const;

    /// cq_->read; a failed entry goes through absorb().
    std::size_t read_cq(fi_cq_data_entry* entries, std::size_t n)
    {
        try {
            return cq_->read(entries, n);
        } catch (const Error& e) {
            return absorb(e);
        }
    }

    std::size_t read_cq_from(fi_cq_data_entry* entries, fi_addr_t* from, std::size_t n)
    {
        try {
            return cq_->read_from(entries, from, n);
        } catch (const Error& e) {
            return absorb(e);
        }
    }
    /// Inside a handler of `e`, a failed entry: the caller's operation is
    /// counted as completed and rethrown; weft's own operation of a closed
    /// endpoint is dropped, and one of a Node peer's endpoint (its receive
    /// slots cancelled, its hello or credits refused) marks the peer broken
    /// (take_broken) instead of failing whoever polls.
    std::size_t absorb(const Error& e);

    static constexpr std::size_t poll_batch = 16;
    /// Reads of weft's own entries only that one poll goes on through.
    static constexpr int max_internal_reads = 4096;
    /// Waits read the clock once per this many + 1 empty polls, about 0.1 ms
    /// of fast polls between checks: a clock read is a system call where the
    /// clock source has no vDSO (the lab's TCG guest; QUIRKS.md has the costs).
    static constexpr std::uint32_t clock_every = 1023;
    /// Waiting::adaptive: empty polls a wait spins before it starts yielding (less one).
    static constexpr std::uint32_t adaptive_spins = 127;
    /// Waiting::yield: empty polls between two yields of the core (less one).
    static constexpr std::uint32_t yield_every = 15;
    /// The fast paths' precondition: nothing lent out, no credit flow control
    /// (whose grants ride on every drain).
    bool plain() const noexcept
    {
        return lent_.empty() && !credits_ && !sources_ && !sleeping_ && side_ == nullptr;
    }
    /// wait(context)'s fast path also serves a queue that names sources
    /// (spin_one reads them): the awaited entry needs none, the others get theirs.
    bool plain_wait() const noexcept
    {
        return lent_.empty() && !credits_ && !sleeping_ && side_ == nullptr;
    }
    /// A notification's or message's peer, from its CQ data or its source.
    void name_source(Completion& c, const fi_cq_data_entry& e, fi_addr_t from) const
    {
        if (c.op == Op::notify)
            c.peer = tagged_notify_ ? tagged_peer(e.data) : source_peer(from);
        else if (c.op == Op::recv)
            c.peer = tagged_messages_ ? tagged_peer(e.data) : source_peer(from);
    }
    bool holds(Op op) noexcept
    {
        for (std::size_t i = 0; i < deferred_.size(); ++i)
            if (deferred_[i].op == op)
                return true;
        return false;
    }
    template <class Accept>
    std::optional<Completion> spin_one(Accept&& accept, Deadline deadline);
    template <bool Sources, class Accept>
    std::optional<Completion> spin(Accept& accept, Deadline deadline);
    /// Whether `e` completes the caller's operation posted with `context`; take_own()
    /// then makes its Completion (one operation fewer in flight).
    bool is_own(const fi_cq_data_entry& e, void* context) const;
    Completion take_own(const fi_cq_data_entry& e);
    /// An entry the fast path read and does not take: kept for the slow path.
    void keep_entry(const fi_cq_data_entry& e, fi_addr_t from, bool sources);
    /// One read of the queue: the caller's completions in it (weft's own
    /// entries handled on the way); read_any_ says whether it read anything.
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
    /// Progress, keeping what completes for later polls.
    void stash_some();
    /// Waiting::yield: lets another thread have this core (out of line: a system call).
    static void yield_core() noexcept;
    /// How a wait spins between its idle checks (every + 1 empty polls):
    /// Waiting::spin's rhythm, Waiting::yield's, or Waiting::adaptive's
    /// (spin's until the wait's first idle check, yield's after it).
    struct Rhythm {
        std::uint32_t every;
        bool yielding;
        bool adaptive;
        /// At an idle check: gives the core away, or starts to (adaptive).
        void idle_check() noexcept
        {
            if (yielding) {
                yield_core();
            } else if (adaptive) {
                yielding = true;
                every = yield_every;
            }
        }
    };
    Rhythm rhythm() const noexcept
    {
        return {adaptive_ ? adaptive_spins : idle_every_, yielding_, adaptive_};
    }
    void defer(const Completion& c) { deferred_.push_back(c); }
    /// defer() of an operation weft completed itself, built in its slot.
    void defer_done(void* context, Op op, std::size_t len)
    {
        Completion& c = deferred_.push_slot();
        c = Completion{.context = context, .op = op, .len = len};
    }
    /// wait() past its look at the front of what weft reported itself.
    Completion wait_queue(void* context, Deadline deadline);
    void repost_lent();
    Completion wait_slow(void* context, Deadline deadline);
    Completion wait_for_slow(Op op, Deadline deadline);
    [[noreturn]] void wait_timeout(const char* what, bool late) const;

    std::shared_ptr<CompletionQueue> cq_;
    SideSource* side_ = nullptr; // a Node's same-host lane
    std::uint32_t side_turn_ = 0; // drain(): the queue is read every 64th turn while idle
    bool queue_busy_ = false;     // its last read brought something: every 8th
    bool queue_due_ = false;      // read it on the next turn (after a sleep)
    bool queue_read_ = true;      // the last drain read it
    bool queue_waited_ = false;   // a poll_one's side took its turn: the queue goes first next
    std::vector<std::pair<PeerId, std::string>> broken_;
    Quirks quirks_;
    detail::Ring<Completion> deferred_;    // read while waiting for something else, or synthesized
    std::array<Completion, 16> waiting_{}; // wait()'s batch: not re-initialised on every spin
    std::vector<const detail::Tag*> lent_; // slots handed to the caller, reposted on the next poll
    std::vector<const detail::Tag*> lent_spare_; // repost_lent()'s, keeping both capacities
    std::vector<detail::Tag> tags_;        // the arena (never reallocated)
    std::vector<std::uint32_t> free_blocks_;
    std::vector<std::uint32_t> quarantine_; // freed, reused once the queue was seen empty
    bool absorbed_ = false;                 // absorb() took an entry since drain() last looked
    std::uint64_t absorptions_ = 0;         // entries absorb() took, ever
    bool read_any_ = false;                 // the last drain() read an entry (its caller's or not)
    std::size_t block_ = 0;                // tags per endpoint
    std::uintptr_t tags_lo_ = 0;
    std::uintptr_t tags_span_ = 0;
    std::size_t attached_ = 0;             // endpoints bound now
    bool credits_ = false;                 // an endpoint counts credits (its grants ride on drains)
    void run_follow_ups();
    std::vector<Endpoint*> follow_ups_;    // endpoints with credits to hand back or a hello to answer
    std::uint32_t idle_polls_ = 0;         // poll_slow(): empty polls, for release_idle
    bool spun_out_ = false;                // spin_one returned because the deadline passed
    bool sources_ = false;                 // fi_cq_readfrom; peer_of_addr_ names them
    bool sleeping_ = false;                // Waiting::sleep: waits sleep on the descriptor
    bool yielding_ = false;                // Waiting::yield: waits yield the core now and then
    bool adaptive_ = false;                // Waiting::adaptive: waits yield once they spun a while
    std::uint32_t stash_spins_ = 0;        // empty stashes, for yielding in the endpoints' waits
    std::uint32_t idle_every_ = clock_every; // a wait's empty polls between its idle checks, less one
    std::uint32_t naps_ = 0;               // sleeps in a row that returned at once to nothing
    std::uint64_t naps_taken_ = 0;         // 1 ms naps taken since the queue opened
    bool notify_peer_bits_ = false;        // a notification's data >> 32 is its PeerId
    std::vector<PeerId> peer_of_addr_;
    bool tagged_notify_ = false;
    bool tagged_messages_ = false;
    std::unordered_map<std::uint32_t, PeerId> peer_of_tag_;
    void (*idle_hook_)(void*) = nullptr;
    void* idle_arg_ = nullptr;
    void (*sleep_hook_)(void*, int) = nullptr;
    void* sleep_arg_ = nullptr;
    // Regions that posted operations use (Local::region), held until no
    // operation is in flight and the caller has dropped them (release_idle):
    // freeing a region under a pending read would let the provider write into
    // freed memory. One cached region per role keeps the fast path one compare.
    std::vector<std::shared_ptr<const MemoryRegion>> held_;
    const MemoryRegion* last_source_ = nullptr;
    const MemoryRegion* last_sink_ = nullptr;
    // MemoryRegion::revocations() when each was last checked: a revocation
    // anywhere sends both through the check again.
    std::uint32_t source_revocations_ = 0;
    std::uint32_t sink_revocations_ = 0;
    std::int64_t in_flight_ = 0; // caller's operations posted and not yet completed
    Activity activity_;          // polls seen, so the progress thread can stay out of the way
    bool wants_thread_ = false; // a progress thread while an endpoint is attached
    std::chrono::microseconds progress_interval_{100};
    std::optional<int> progress_cpu_;
    std::unique_ptr<ProgressThread> progress_; // stopped first: declared last
};

} // namespace weft

#include "weft/fabric/detail/completions.inl"
