// SPDX-License-Identifier: MIT
/// @brief What a Node's dispatch() routes completions to: the arena of
/// contexts libfabric holds for awaited operations (Slot), and the waiters
/// (coroutines, Asio handlers, Transfer::wait) that are resumed once what they
/// wait for has come, its deadline has passed, it was cancelled, or its peer was
/// lost. Not a header of its own: weft/peers/node.hpp includes it; weft/async.hpp
/// is the surface.
///
/// The rules (docs/async.md): a Slot, never a coroutine frame, is what the
/// provider holds, so a waiter that timed out, was cancelled or destroyed
/// leaves a slot behind that its late completion frees ("reaped"), and
/// nothing is delivered to it. Waiters resume only inside Node::dispatch(), on
/// the thread holding the Node, after the batch of completions is read.
/// Nothing here allocates once the arena and the lists have grown to the most
/// operations in flight (the first ones of that many).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "weft/base/deadline.hpp"
#include "weft/fabric/completions.hpp"

namespace weft::detail {

/// Where an awaited operation's completion goes (an awaiter, a Transfer).
class Sink {
public:
    /// The operation posted with slot `index` of this sink completed: `c`, or
    /// `error` when it failed (its Error, or Error::peer_lost() for a lost peer).
    virtual void completed(std::uint32_t index, const Completion& c,
                           const std::exception_ptr& error) noexcept = 0;

protected:
    ~Sink() = default;
};

/// The context of one awaited operation, in the Node's arena.
struct Slot {
    Sink* sink = nullptr;      // nullptr while posted: abandoned, freed when it completes
    std::uint32_t index = 0;   // handed to the sink
    PeerId peer{};
    bool posted = false;
    bool kept = false;         // reserved by a Transfer across posts
    Slot* next_free = nullptr;
};

/// Something suspended until dispatch() readies it.
class Waiter {
public:
    /// Why a waiter was readied before what it waited for came.
    enum class Early : std::uint8_t { no, timeout, cancel, lost };

    /// Resumes it: its coroutine, or (an Asio operation) its hook.
    virtual void resume() noexcept
    {
        if (on_resume)
            on_resume(resume_arg);
        else
            handle.resume();
    }
    /// Its deadline passed, its stop token fired or its peer was lost: give up
    /// what it holds (an awaiter abandons its slot), before resume().
    virtual void give_up(Early why) noexcept = 0;
    /// Whether losing `p` ends this wait (a wait on several peers says so itself).
    virtual bool waits_on(PeerId p) const noexcept { return peer && peer == p; }

    std::coroutine_handle<> handle{};
    void (*on_resume)(void*) noexcept = nullptr; // instead of the handle (weft/asio.hpp)
    void* resume_arg = nullptr;
    Deadline deadline = Deadline::never();
    PeerId peer{};                        // lost: readied with Early::lost
    std::atomic<bool> cancelled{false};   // a stop token fired (any thread)
    Early early = Early::no;
    bool linked = false;
    Waiter* prev = nullptr;
    Waiter* next = nullptr;

protected:
    ~Waiter() = default;
};

/// A waiter for notifications or messages: offered each unclaimed one.
class Listener : public Waiter {
public:
    /// True when it took `c` (and readied itself, once it has what it waits for).
    virtual bool offer(const Completion& c) noexcept = 0;
    Listener* lprev = nullptr;
    Listener* lnext = nullptr;
    bool listening = false;

protected:
    ~Listener() = default;
};

class Dispatcher {
public:
    Dispatcher() = default;
    Dispatcher(const Dispatcher&) = delete;
    Dispatcher& operator=(const Dispatcher&) = delete;

    // ---- the arena ----
    Slot* take(Sink* sink, std::uint32_t index, PeerId peer, bool kept)
    {
        if (!free_ || peer.index >= in_flight_.size()) [[unlikely]]
            grow(peer); // a new block; in_flight_ sized now, not on the post
        Slot* s = free_;
        free_ = s->next_free;
        *s = Slot{sink, index, peer, false, kept, nullptr};
        return s;
    }
    /// The operation of `s` completed and its owner has taken that: `s` is free.
    void finish(Slot* s) noexcept
    {
        unposted(s);
        free(s);
    }
    /// Its owner no longer wants it: freed now, or (posted) when it completes.
    void release(Slot* s) noexcept;
    bool owns(const void* ctx) const noexcept
    {
        const auto p = reinterpret_cast<std::uintptr_t>(ctx);
        for (const Block& b : blocks_)
            if (p - b.lo < b.span)
                return true;
        return false;
    }
    void posted(Slot* s) noexcept
    {
        s->posted = true;
        ++in_flight_[s->peer.index]; // sized by take()
    }
    /// The post threw, or the operation completed: the slot is not in flight.
    void unposted(Slot* s) noexcept
    {
        if (s->posted) {
            s->posted = false;
            --in_flight_[s->peer.index]; // sized by take()
        }
    }
    /// A completion (or, with `error`, a failure) of the operation of `s`.
    void complete(Slot* s, const Completion& c, const std::exception_ptr& error) noexcept;
    /// Operations to `peer` posted and not completed (abandoned ones too).
    std::uint32_t in_flight(PeerId peer) const noexcept
    {
        return peer.index < in_flight_.size() ? in_flight_[peer.index] : 0;
    }

    // ---- waiters ----
    /// Links `w` (deadline, cancel, peer lost); readied by ready().
    void suspend(Waiter& w) noexcept;
    void unlink(Waiter& w) noexcept;
    /// Queues `w` to be resumed at the end of this dispatch.
    void ready(Waiter& w);
    void listen(Listener& l) noexcept;
    void unlisten(Listener& l) noexcept;
    /// Offers a notification or message to the listeners, oldest first.
    bool offer(const Completion& c) noexcept;
    /// A stop token fired somewhere: dispatch() looks at the cancelled flags.
    void poke() noexcept;
    /// Readies waiters whose deadline passed or that were cancelled.
    void expire();
    /// `peer` is lost: its waiters readied, its operations failed with `error`
    /// (their slots abandoned); `closed`: its endpoint is closed (MSG), so its
    /// abandoned slots are freed once the queue is next seen empty.
    void peer_lost(PeerId peer, const std::exception_ptr& error, bool closed);
    /// The queue was read empty: slots of closed endpoints can go.
    void quiet() noexcept;
    /// Resumes what is ready; true when it resumed something.
    bool resume_ready();
    bool resuming() const noexcept { return resuming_; }
    bool listening() const noexcept { return listeners_ != nullptr; }
    /// A cancel to look at; a waiter with a deadline; orphans to free.
    bool poked() const noexcept { return poked_.load(std::memory_order_relaxed); }
    bool due() const noexcept { return next_due_ != Clock::time_point::max(); }
    bool orphaned() const noexcept { return !orphans_.empty() || !closing_.empty(); }
    /// Slots exist: completions may carry them (Node::poll hands those over).
    bool armed() const noexcept { return !blocks_.empty(); }
    bool idle() const noexcept { return ready_.empty() && !waiters_; }
    /// The earliest deadline of a suspended waiter.
    Deadline next_deadline() const noexcept;

private:
    struct Block {
        std::unique_ptr<Slot[]> slots;
        std::uintptr_t lo;
        std::uintptr_t span;
    };
    static constexpr std::size_t block_slots = 1024;
    void grow(PeerId peer);
    void free(Slot* s) noexcept
    {
        s->sink = nullptr; // take() sets the rest
        s->posted = s->kept = false;
        s->next_free = free_;
        free_ = s;
    }

    std::vector<Block> blocks_;
    Slot* free_ = nullptr;
    std::vector<std::uint32_t> in_flight_;    // by PeerId index
    std::vector<Slot*> orphans_;              // abandoned slots of closed endpoints
    std::vector<Slot*> closing_;              // the same, until the queue is seen empty
    Waiter* waiters_ = nullptr;               // suspended
    Clock::time_point next_due_ = Clock::time_point::max(); // their earliest deadline (or later)
    Listener* listeners_ = nullptr;           // oldest first
    Listener* listeners_tail_ = nullptr;
    std::vector<Waiter*> ready_;
    std::vector<Waiter*> resuming_list_;
    bool resuming_ = false;
    std::atomic<bool> poked_{false};

public:
    /// An eventfd in the Node's epoll set (Waiting::sleep), written by poke()
    /// so that a sleeper wakes for a cancel from another thread; -1: none.
    int wake_fd = -1;
    /// Reads the poke (and the eventfd) once: true when a stop token fired.
    bool take_poke() noexcept;
};

} // namespace weft::detail
