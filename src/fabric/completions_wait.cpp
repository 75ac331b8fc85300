// SPDX-License-Identifier: MIT
// Completions' waits: for one operation, for a kind of completion (from one
// peer), busy or asleep on the queue's wait object, each with a deadline whose
// expiry names what was waited for and why it may not have come.
#include "weft/fabric/completions.hpp"
#include "check.hpp"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "weft/info/options.hpp"

namespace weft {

namespace {
int deadline_ms(Deadline d) noexcept { return d.remaining_ms(); }
} // namespace

template <class Pred>
Completion Completions::wait_until(Pred&& pred, Deadline deadline, const char* what)
{
    if (!lent_.empty())
        repost_lent();
    auto take = [&](Completion c) {
        if (c.lent)
            lent_.push_back(c.lent);
        return c;
    };
    for (std::size_t i = 0; i < deferred_.size(); ++i)
        if (pred(deferred_[i])) {
            spun_out_ = false;
            const Completion c = deferred_[i];
            deferred_.erase(i);
            return take(c);
        }
    // Whether the deadline had passed before the wait began (its error says
    // so): the clock read once what weft holds already did not answer.
    const bool late = deadline.expired() && !std::exchange(spun_out_, false);
    spun_out_ = false;
    std::uint32_t spins = 0;
    Rhythm rhythm = this->rhythm();
    bool woke_at_once = false; // the last sleep returned within 50 us
    for (;;) {
        auto& got = waiting_;
        const std::size_t n = drain(got);
        // A wait object that does not hold (net's stays readable once a connection
        // exists; tcp's trywait can keep saying "poll first" with nothing to read) must
        // not make this a spin ("node sleep: a server with 8 idle peers uses no CPU while
        // it waits"): two sleeps in a row that return at once to nothing nap 1 ms. A sleep
        // its completion ended at once is not one of them, nor counts toward the next
        // wait's ("node sleep: a sleeping wait woken by its completion does not nap").
        if (n > 0)
            naps_ = 0;
        else if (std::exchange(woke_at_once, false) && ++naps_ >= 2) {
            ++naps_taken_;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::size_t hit = n;
        for (std::size_t i = 0; i < n; ++i) {
            if (hit == n && pred(got[i]))
                hit = i;
            else
                deferred_.push_back(got[i]);
        }
        if (hit != n) {
            if (in_flight_ <= 0 && !held_.empty())
                release_idle();
            return take(got[hit]);
        }
        if (sleeping_ && !queue_read_)
            queue_due_ = true; // the lane's turn: the queue is looked at before any sleep
        else if (sleeping_ && n == 0 && !read_any_ && deadline_ms(deadline) > 0) {
            // Nothing pending: sleep until something arrives (bounded, so the
            // idle hook and the deadline are seen).
            const int ms = std::min(deadline_ms(deadline), quirks_.wait_fd_misses_data ? 10 : 100);
            const auto before = Clock::now();
            if (sleep_hook_)
                sleep_hook_(sleep_arg_, ms);
            else if (trywait())
                cq_->sleep(ms);
            woke_at_once = Clock::now() - before < std::chrono::microseconds(50);
            spins = rhythm.every; // look at the hook and the deadline now
        }
        if ((++spins & rhythm.every) == 0) [[unlikely]] {
            rhythm.idle_check();
            if (idle_hook_)
                idle_hook_(idle_arg_);
            if (deadline.expired())
                wait_timeout(what, late);
        }
    }
}

void Completions::wait_timeout(const char* what, bool late) const
{
    if (late)
        detail::throw_error("wait", -FI_ETIMEDOUT, provider(),
                            fmt::format("the deadline had already passed when the wait for {} "
                                        "began, and nothing had completed: nothing is known to "
                                        "be wrong with the peer. Give the wait a deadline in the "
                                        "future (Deadline::after, or Deadline::never())",
                                        what));
    std::string hint = fmt::format("no completion for {} before the deadline", what);
    if (quirks_.target_needs_progress)
        hint += "; this provider moves data only while the peer reads its completion "
                "queue, so the peer must poll its endpoint or run a progress thread "
                "(Progress::automatic)";
    if (quirks_.remote_errors_silent)
        hint += "; this provider drops a refused RMA (wrong key, bounds, access) "
                "without an error, so check the RemoteRegion too";
    if (const std::size_t w = quirks_.send_window_packets)
        hint += fmt::format("; this provider can stall for good once its send window of {} "
                            "packets to one peer is full (an operation takes about 1 + bytes / "
                            "1432; Quirks::send_window_packets): keep fewer or smaller "
                            "operations in flight, or raise FI_OFI_RXD_MAX_UNACKED on both sides",
                            w);
    if (const auto held = cq_->locked_for(); held > CompletionQueue::held_by_the_dead)
        hint = fmt::format(
            "{}; and the provider's progress lock of this endpoint has been held for {} ms "
            "without a pause: a peer killed while it held the lock holds it for good "
            "(libfabric 1.17 shm, QUIRKS.md), so nothing on this Node can move again. weft "
            "stays out of the provider meanwhile instead of spinning in it: end this Node "
            "and open a new one",
            hint, std::chrono::duration_cast<std::chrono::milliseconds>(held).count());
    hint += "; is the peer alive?";
    detail::throw_error("wait", -FI_ETIMEDOUT, provider(), hint);
}

Completion Completions::wait_slow(void* context, Deadline deadline)
{
    return wait_until(
        [context](const Completion& c) {
            return c.context == context && c.op != Op::recv && c.op != Op::notify;
        },
        deadline, "the operation");
}

Completion Completions::wait_for(Op op, PeerId peer, Deadline deadline)
{
    const char* what = op == Op::notify ? "a notification from the peer"
                       : op == Op::recv ? "a message from the peer" : "an operation";
    return wait_until([op, peer](const Completion& c) { return c.op == op && c.peer == peer; },
                      deadline, what);
}

Completion Completions::wait_for_slow(Op op, Deadline deadline)
{
    const char* what = op == Op::notify ? "a notification" : op == Op::recv ? "a message" : "an operation";
    return wait_until([op](const Completion& c) { return c.op == op; }, deadline, what);
}

} // namespace weft
