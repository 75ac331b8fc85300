// SPDX-License-Identifier: MIT
// The dispatcher's arena of slots and its lists of waiters: taking and
// freeing slots, readying waiters, deadlines, cancels and lost peers.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "weft/peers/detail/dispatcher.hpp"

namespace weft::detail {

void Dispatcher::grow(PeerId peer)
{
    if (peer.index >= in_flight_.size())
        in_flight_.resize(peer.index + 1u, 0);
    if (free_)
        return;
    // A new block: the arena grows to the most operations ever in flight,
    // and never moves (libfabric holds pointers into it).
    Block b{std::make_unique<Slot[]>(block_slots), 0, block_slots * sizeof(Slot)};
    b.lo = reinterpret_cast<std::uintptr_t>(b.slots.get());
    for (std::size_t i = block_slots; i-- > 0;) {
        b.slots[i].next_free = free_;
        free_ = &b.slots[i];
    }
    blocks_.push_back(std::move(b));
    ready_.reserve(blocks_.size() * block_slots);
    resuming_list_.reserve(blocks_.size() * block_slots);
}

void Dispatcher::release(Slot* s) noexcept
{
    if (s->posted) {
        s->sink = nullptr; // abandoned: its completion frees it
        s->kept = false;
        return;
    }
    free(s);
}

void Dispatcher::complete(Slot* s, const Completion& c, const std::exception_ptr& error) noexcept
{
    unposted(s);
    Sink* sink = s->sink;
    const std::uint32_t index = s->index;
    if (!s->kept)
        free(s); // before the sink runs: it may take a slot again
    if (sink)
        sink->completed(index, c, error);
}

void Dispatcher::suspend(Waiter& w) noexcept
{
    w.early = Waiter::Early::no;
    w.linked = true;
    next_due_ = std::min(next_due_, w.deadline.when());
    w.prev = nullptr;
    w.next = waiters_;
    if (waiters_)
        waiters_->prev = &w;
    waiters_ = &w;
}

void Dispatcher::unlink(Waiter& w) noexcept
{
    if (!w.linked)
        return;
    (w.prev ? w.prev->next : waiters_) = w.next;
    if (w.next)
        w.next->prev = w.prev;
    w.prev = w.next = nullptr;
    w.linked = false;
}

void Dispatcher::ready(Waiter& w)
{
    if (!w.linked)
        return; // not suspended (still in await_ready), or readied already
    unlink(w);
    ready_.push_back(&w);
}

void Dispatcher::listen(Listener& l) noexcept
{
    l.listening = true;
    l.lnext = nullptr;
    l.lprev = listeners_tail_;
    (listeners_tail_ ? listeners_tail_->lnext : listeners_) = &l;
    listeners_tail_ = &l;
}

void Dispatcher::unlisten(Listener& l) noexcept
{
    if (!l.listening)
        return;
    (l.lprev ? l.lprev->lnext : listeners_) = l.lnext;
    (l.lnext ? l.lnext->lprev : listeners_tail_) = l.lprev;
    l.lprev = l.lnext = nullptr;
    l.listening = false;
}

bool Dispatcher::offer(const Completion& c) noexcept
{
    for (Listener* l = listeners_; l; l = l->lnext)
        if (l->offer(c))
            return true;
    return false;
}

void Dispatcher::poke() noexcept
{
    poked_.store(true, std::memory_order_release);
    if (wake_fd >= 0) {
        const std::uint64_t one = 1;
        (void)!::write(wake_fd, &one, sizeof one);
    }
}

bool Dispatcher::take_poke() noexcept
{
    if (!poked_.load(std::memory_order_relaxed))
        return false;
    poked_.store(false, std::memory_order_relaxed);
    if (wake_fd >= 0) {
        std::uint64_t n = 0;
        (void)!::read(wake_fd, &n, sizeof n);
    }
    return true;
}

void Dispatcher::expire()
{
    const bool poked = take_poke();
    if (!waiters_) {
        next_due_ = Clock::time_point::max();
        return;
    }
    const auto now = Clock::now();
    if (!poked && now < next_due_)
        return;
    next_due_ = Clock::time_point::max(); // recomputed from those that stay
    for (Waiter* w = waiters_; w;) {
        Waiter* next = w->next;
        Waiter::Early why = Waiter::Early::no;
        if (poked && w->cancelled.load(std::memory_order_acquire))
            why = Waiter::Early::cancel;
        else if (w->deadline.when() <= now)
            why = Waiter::Early::timeout;
        if (why != Waiter::Early::no) {
            w->early = why;
            w->give_up(why);
            ready(*w);
        } else {
            next_due_ = std::min(next_due_, w->deadline.when());
        }
        w = next;
    }
}

void Dispatcher::peer_lost(PeerId peer, const std::exception_ptr& error, bool closed)
{
    // Its operations fail now (their completions, should they come, are reaped).
    for (Block& b : blocks_)
        for (std::size_t i = 0; i < block_slots; ++i) {
            Slot& s = b.slots[i];
            if (!s.posted || s.peer != peer || !s.sink)
                continue;
            Sink* sink = s.sink;
            s.sink = nullptr;
            s.kept = false;
            if (closed)
                orphans_.push_back(&s);
            sink->completed(s.index, Completion{}, error);
        }
    for (Waiter* w = waiters_; w;) {
        Waiter* next = w->next;
        if (w->waits_on(peer)) {
            w->early = Waiter::Early::lost;
            w->give_up(Waiter::Early::lost);
            ready(*w);
        }
        w = next;
    }
}

void Dispatcher::quiet() noexcept
{
    // Orphans of an endpoint closed before the last read found the queue
    // empty cannot complete any more: theirs were flushed before that read.
    for (Slot* s : closing_)
        if (s->posted && !s->sink) {
            unposted(s);
            free(s);
        }
    closing_.clear();
    closing_.swap(orphans_);
}

bool Dispatcher::resume_ready()
{
    if (ready_.empty())
        return false;
    resuming_ = true;
    // Resumed coroutines may ready others (a Transfer they post completes at
    // once): those wait for the next round, so no resume nests in another.
    while (!ready_.empty()) {
        resuming_list_.swap(ready_);
        for (Waiter* w : resuming_list_)
            w->resume();
        resuming_list_.clear();
    }
    resuming_ = false;
    return true;
}

Deadline Dispatcher::next_deadline() const noexcept
{
    Deadline d = Deadline::never();
    for (const Waiter* w = waiters_; w; w = w->next)
        if (w->deadline.when() < d.when())
            d = w->deadline;
    return d;
}

} // namespace weft::detail
