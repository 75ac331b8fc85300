// SPDX-License-Identifier: MIT
// Completions: turning queue entries into weft::Completion, keeping what
// arrives while waiting for something else, and the tags of weft's own
// operations. The waits are in completions_wait.cpp, the regions posted
// operations hold in completions_regions.cpp.
#include "weft/fabric/completions.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "frame.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/info/options.hpp"

namespace weft {

std::string_view to_string(Op op) noexcept
{
    switch (op) {
    case Op::send: return "send";
    case Op::recv: return "recv";
    case Op::write: return "write";
    case Op::read: return "read";
    case Op::atomic: return "atomic";
    case Op::notify: return "notify";
    }
    return "?";
}

struct Completions::Private {};

std::shared_ptr<Completions> Completions::open(std::shared_ptr<Domain> domain,
                                               const Options& options, std::size_t cq_size,
                                               std::size_t endpoints, std::size_t slots)
{
    const bool sleeping = options.waiting == Waiting::sleep;
    // With the same-host lane a sleeping Node sleeps on the lane's wake-ups;
    // a provider without a descriptor (shm) is read between naps of 10 ms.
    auto cq = CompletionQueue::open(std::move(domain), cq_size, sleeping,
                                    options.same_host == SameHost::lane ||
                                        options.same_host == SameHost::enforced);
    auto q = std::make_shared<Completions>(Private{}, std::move(cq), endpoints, slots);
    q->sleeping_ = sleeping;
    q->yielding_ = options.waiting == Waiting::yield;
    q->adaptive_ = options.waiting == Waiting::adaptive;
    q->idle_every_ = q->yielding_ ? yield_every : clock_every;
    q->wants_thread_ = wants_progress_thread(options, q->quirks_);
    if (q->quirks_.wait_fd_misses_data)
        q->cq_->cap_sleep(10);
    q->progress_interval_ = options.progress_interval;
    q->progress_cpu_ = options.progress_cpu;
    return q;
}

void Completions::yield_core() noexcept
{
    ::sched_yield();
}

void Completions::endpoint_enabled()
{
    // Not before: libfabric's tcp crashes when a queue is read while an
    // endpoint is being bound to it. Again after the last endpoint stopped it
    // (stop_progress): a Node's next peer's endpoint needs it as much.
    if (wants_thread_ && !progress_) {
        progress_ = std::make_unique<ProgressThread>(cq_, activity_, progress_interval_,
                                                     progress_cpu_);
    }
}

Completions::Completions(Private, std::shared_ptr<CompletionQueue> cq, std::size_t endpoints,
                         std::size_t slots)
    : cq_(std::move(cq)), quirks_(cq_->domain()->quirks()), block_(2 + slots)
{
    tags_.resize(std::max<std::size_t>(1, endpoints) * block_);
    tags_lo_ = reinterpret_cast<std::uintptr_t>(tags_.data());
    tags_span_ = tags_.size() * sizeof(detail::Tag);
    for (std::size_t b = tags_.size() / block_; b-- > 0;)
        free_blocks_.push_back(static_cast<std::uint32_t>(b));
}

Completions::~Completions() = default;

bool Completions::stop_progress() noexcept
{
    if (!progress_)
        return true;
    if (!progress_->stop(ProgressThread::grace))
        return false;
    progress_.reset();
    return true;
}

std::span<detail::Tag> Completions::attach(Endpoint* owner, std::size_t slots)
{
    if (slots + 2 > block_ || free_blocks_.empty())
        throw UsageError("Completions::attach", -FI_EINVAL, std::string(provider()),
                         fmt::format("this completion queue ({} entries) serves {} endpoint(s) "
                                     "of {} receive slots each, and all are taken: open another "
                                     "Node, or lower Options::tx_depth and Options::rx_slots so "
                                     "that more fit",
                                     cq_->size(), tags_.size() / block_, block_ - 2));
    const std::size_t b = free_blocks_.back();
    free_blocks_.pop_back();
    std::span<detail::Tag> tags(tags_.data() + b * block_, slots + 2);
    tags[0] = {owner, 0, detail::Tag::Kind::internal};
    tags[1] = {owner, 0, detail::Tag::Kind::fence};
    for (std::size_t i = 0; i < slots; ++i)
        tags[2 + i] = {owner, static_cast<std::uint32_t>(i), detail::Tag::Kind::slot};
    ++attached_;
    return tags;
}

void Completions::detach(std::span<detail::Tag> tags) noexcept
{
    if (tags.empty())
        return;
    // Entries of a closed endpoint may still sit in the queue: their tags stay
    // ownerless (ignored) until the queue has been seen empty (drain()).
    for (auto& t : tags)
        t = {nullptr, 0, detail::Tag::Kind::free};
    const auto b = static_cast<std::uint32_t>((tags.data() - tags_.data()) / static_cast<std::ptrdiff_t>(block_));
    quarantine_.push_back(b);
    std::erase_if(lent_, [&](const detail::Tag* t) { return t >= tags.data() && t < tags.data() + tags.size(); });
    std::erase(follow_ups_, tags.front().owner);
    --attached_;
}

void Completions::source_is(fi_addr_t addr, PeerId peer)
{
    if (addr >= peer_of_addr_.size())
        peer_of_addr_.resize(addr + 1);
    peer_of_addr_[addr] = peer;
}

// ---- completions ----

bool Completions::translate(const fi_cq_data_entry& e, Completion& c)
{
    void* ctx = e.op_context;
    const auto* tag = ours(ctx) ? static_cast<const detail::Tag*>(ctx) : nullptr;
    const bool is_slot = tag && tag->kind == detail::Tag::Kind::slot;
    // A peer's notification is a remote write with CQ data. Its context is no
    // pointer of the caller's: nullptr, a receive slot it consumed
    // (FI_RX_CQ_DATA), or whatever the provider put there (shm: its command's
    // msg_id, 0x1 ...). A local write_notify completion may also carry
    // FI_REMOTE_CQ_DATA (sockets sets it), but never FI_REMOTE_WRITE.
    // A message may carry CQ data too (a Node's tagged sends): FI_RECV says so.
    if ((e.flags & FI_REMOTE_CQ_DATA) && !(e.flags & FI_RECV) &&
        ((e.flags & FI_REMOTE_WRITE) || is_slot || !ctx)) {
        c = Completion{nullptr, Op::notify, 0, static_cast<std::uint32_t>(e.data), {}};
        if (is_slot && tag->owner) {
            c.peer = tag->owner->peer_;
            tag->owner->repost(tag->index);
        } else if (notify_peer_bits_) {
            c.peer = PeerId{static_cast<std::uint32_t>(e.data >> 32)};
        }
        return true;
    }
    if (!tag) {
        c = Completion{ctx, detail::op_from_flags(e.flags), e.len, 0, {}};
        --in_flight_;
        return true;
    }
    if (!tag->owner)
        return false; // of an endpoint that has been closed
    switch (tag->kind) {
    case detail::Tag::Kind::fence:
        tag->owner->fence_done_ = true;
        return false;
    case detail::Tag::Kind::slot:
        if (!tag->owner->received(*tag, e, c))
            return false;
        c.peer = tag->owner->peer_;
        return true;
    case detail::Tag::Kind::internal:
    case detail::Tag::Kind::free:
    case detail::Tag::Kind::side: // never a libfabric context
        return false;
    }
    return false;
}

std::size_t Completions::translate_all(const fi_cq_data_entry* entries, std::size_t n,
                                       std::span<Completion> out)
{
    std::size_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const fi_cq_data_entry& e = entries[i];
        // The common case inline: the caller's own operation completed.
        if (!(e.flags & FI_REMOTE_CQ_DATA) && !ours(e.op_context)) [[likely]] {
            out[m++] = Completion{e.op_context, detail::op_from_flags(e.flags), e.len, 0, {}};
            --in_flight_;
            continue;
        }
        if (translate(e, out[m]))
            ++m;
    }
    return m;
}

std::size_t Completions::drain(std::span<Completion> out)
{
    activity_.note();
    const std::uint64_t absorbed_before = absorptions_;
    std::array<fi_cq_data_entry, poll_batch> entries;
    std::size_t n = 0;
    std::size_t m = 0;
    // What arrived beside the queue first: a failure it reports is thrown
    // before anything is taken from either.
    // With nothing of this side's in flight through libfabric, its queue holds
    // only what other peers send: read every 64th time (every 8th while it
    // keeps bringing something, and the first time after a sleep), so that a
    // wait for the lane spins on memory, not on the provider (shm's
    // fi_cq_read costs ~20 looks at a ring). On a turn that reads it, the side
    // leaves it room; with room for one only (poll_one), the side goes first
    // and the queue's turn waits for the next call, where the queue goes first
    // (and the side after it, if the queue had nothing): neither starves.
    const bool queue_turn = side_ == nullptr || in_flight_ > 0 || std::exchange(queue_due_, false) ||
                            (++side_turn_ & (queue_busy_ ? 7u : 63u)) == 0;
    const bool queue_first = queue_turn && out.size() == 1 && std::exchange(queue_waited_, false);
    const std::span<Completion> side_room = queue_first             ? out.first(0)
                                            : queue_turn && out.size() > 1 ? out.first(out.size() - 1)
                                                                           : out;
    std::size_t pulled = side_ != nullptr ? side_->pull(side_room) : 0;
    m = pulled;
    std::size_t room = queue_turn ? std::min(poll_batch, out.size() - m) : 0;
    if (queue_turn && room == 0)
        queue_due_ = queue_waited_ = true;
    queue_read_ = room > 0;
    if (room == 0) {
    } else if (sources_) {
        // One at a time: an entry's Completion must get its own source.
        std::array<fi_addr_t, poll_batch> from;
        n = read_cq_from(entries.data(), from.data(), room);
        for (std::size_t i = 0; i < n; ++i) {
            if (!translate(entries[i], out[m]))
                continue;
            name_source(out[m], entries[i], from[i]);
            ++m;
        }
    } else {
        n = read_cq(entries.data(), room);
        m += translate_all(entries.data(), n, out.subspan(m));
    }
    if (queue_first && m == 0 && side_ != nullptr) // the queue had nothing: the side after all
        m = pulled = side_->pull(out);
    read_any_ = n > 0 || absorptions_ != absorbed_before || pulled > 0;
    if (room > 0)
        queue_busy_ = n > 0;
    if (!follow_ups_.empty())
        run_follow_ups();
    // Nothing of a closed endpoint is left once a read finds the queue empty;
    // a read that absorbed an error entry (n == 0 too) has not: a closed
    // endpoint's cancelled receives come one entry per read, and a block
    // reused early would lend the rest to its next owner (on tcp, such a
    // crossing loses the new connection's peer).
    if (room > 0 && n == 0 && !quarantine_.empty() && !std::exchange(absorbed_, false)) {
        free_blocks_.insert(free_blocks_.end(), quarantine_.begin(), quarantine_.end());
        quarantine_.clear();
    }
    return m;
}

std::size_t Completions::lend(std::span<const Completion> taken)
{
    for (const Completion& c : taken)
        if (c.lent)
            lent_.push_back(c.lent);
    return taken.size();
}

std::size_t Completions::take_entries(const fi_cq_data_entry* entries, std::size_t n,
                                      std::span<Completion> out)
{
    const std::size_t m = translate_all(entries, n, out);
    // A hello to answer, met by poll()'s fast path: answered now, as drain()
    // does (left for later, a Node that only polls never finished accepting a
    // connection: its peer lost it).
    if (!follow_ups_.empty()) [[unlikely]]
        run_follow_ups();
    return lend(out.first(m));
}

void Completions::stash_some()
{
    std::array<Completion, 16> got;
    const std::size_t n = drain(got);
    for (std::size_t i = 0; i < n; ++i)
        deferred_.push_back(got[i]);
    // The endpoints' own waits (fences, credits, hellos, connects) spin here:
    // under Waiting::yield they give the core away as the other waits do.
    if (yielding_ && !read_any_ && (++stash_spins_ & yield_every) == 0) [[unlikely]]
        yield_core();
}

void Completions::add_side(SideSource* side) noexcept
{
    // Its buffers go with it: no tag of it may be read again, nor a message
    // of it handed out.
    const auto its = [](const detail::Tag* t) {
        return t != nullptr && t->owner == nullptr && t->kind == detail::Tag::Kind::side;
    };
    if (side == nullptr) {
        std::erase_if(lent_, its);
        for (std::size_t i = 0; i < deferred_.size();)
            if (its(deferred_[i].lent))
                deferred_.erase(i);
            else
                ++i;
    }
    side_ = side;
}

void Completions::repost_lent()
{
    // Through a second vector, so that neither loses its capacity: a lent
    // slot costs no allocation per message (tests/async/allocations.cpp).
    lent_spare_.swap(lent_);
    for (const detail::Tag* t : lent_spare_)
        if (t->owner)
            t->owner->repost(t->index);
        else if (t->kind == detail::Tag::Kind::side && side_ != nullptr)
            side_->release(t->index);
    lent_spare_.clear();
    if (!follow_ups_.empty())
        run_follow_ups();
}

void Completions::run_follow_ups()
{
    for (Endpoint* ep : std::exchange(follow_ups_, {}))
        ep->follow_up();
}

std::size_t Completions::absorb(const Error& e)
{
    if (!ours(e.context())) {
        --in_flight_; // the caller's operation: it is done, and it is the caller's error
        throw;
    }
    const auto* tag = static_cast<const detail::Tag*>(e.context());
    absorbed_ = true;
    ++absorptions_;
    if (tag->owner == nullptr || tag->owner->closed())
        return 0; // an entry of a closed endpoint (cancelled at close): nobody's
    if (tag->owner->peer_) {
        // A connection that never came up (an attempt refused when two Nodes
        // connect to each other at once, tcp cancelling its receives) is the
        // event queue's to report, not its receives': the peer's other
        // connection may be the one that lives.
        if (tag->owner->was_connected())
            broken_.emplace_back(tag->owner->peer_, e.what());
        return 0;
    }
    throw;
}

std::size_t Completions::poll_slow(std::span<Completion> out)
{
    if (!lent_.empty())
        repost_lent();
    std::size_t n = 0;
    while (n < out.size() && !deferred_.empty())
        out[n++] = deferred_.pop_front();
    if (n < out.size())
        n += drain(out.subspan(n));
    // A read that found only weft's own entries (a hello, a credit write, a
    // removed peer's cancelled receives): read on, so that 0 means the queue
    // had nothing for the caller and a caller that polls until 0 never stops
    // in front of its own completions (the TEST_CASE "node: poll returns a
    // notification that waits behind entries of a removed peer"). Bounded, so
    // that a provider that keeps reporting errors cannot hold the caller here:
    // past max_internal_reads a poll returns 0 with entries left, once.
    for (int reads = 0; n == 0 && read_any_ && reads < max_internal_reads; ++reads)
        n = drain(out);
    // Regions the caller dropped go once nothing flies: looked for after a
    // completion, and every 64th poll that found none (a poller spinning on
    // its memory comes here between every two looks).
    if (in_flight_ <= 0 && !held_.empty() && (n > 0 || (++idle_polls_ & 63u) == 0))
        release_idle();
    return lend(out.first(n));
}

std::optional<Completion> Completions::poll_one()
{
    Completion c;
    if (poll(std::span(&c, 1)) == 1)
        return c;
    return std::nullopt;
}

} // namespace weft
