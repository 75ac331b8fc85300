// SPDX-License-Identifier: MIT
// The awaitables of node.hpp: what each posts in await_ready, how it parks
// on the dispatcher, and how it ends (its completion, or early: a deadline, a
// stop token, its peer lost).
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/peers/node.hpp"

namespace weft::detail {

void AwaitBase::park(Waiter& w, std::coroutine_handle<> h, PeerId peer)
{
    w.handle = h;
    w.deadline = deadline_;
    w.peer = peer;
    node_.dispatcher().suspend(w);
    if (stop_.stop_possible())
        on_stop_.emplace(stop_, CancelWaiter{&w, &node_.dispatcher()});
}

void AwaitBase::unpark(Waiter& w) noexcept
{
    on_stop_.reset(); // waits for a callback running on another thread
    node_.dispatcher().unlink(w);
}

void AwaitBase::throw_early(Waiter::Early why, const char* what, PeerId peer) const
{
    const std::string provider(node_.provider());
    switch (why) {
    case Waiter::Early::cancel:
        throw Error("co_await", -FI_ECANCELED, provider,
                    fmt::format("the wait for {} was cancelled (its stop token); the operation "
                                "itself may still complete: its buffers are the caller's again "
                                "once Node::drained(peer)",
                                what));
    case Waiter::Early::lost:
        throw Error("co_await", -FI_ECONNRESET, provider,
                    fmt::format("peer {} was lost while this side waited for {}", peer.index, what),
                    nullptr, true);
    default:
        throw TimeoutError("co_await", -FI_ETIMEDOUT, provider,
                           fmt::format("no {} before the deadline; an operation still flies: its "
                                       "buffers are the caller's again once Node::drained(peer); "
                                       "is the peer alive?",
                                       what));
    }
}

// ---- OpAwait ----

void OpAwait::abandon() noexcept
{
    if (linked) // a frame destroyed while suspended (a Task dropped)
        unpark(*this);
    if (slot_)
        node_.dispatcher().release(slot_); // abandoned: reaped when it completes
}

bool OpAwait::await_ready()
{
    // On the same-host lane the copy is the operation: done on return.
    if (node_.lane_now(peer_, static_cast<Node::LaneOp>(kind_), local_, remote_, offset_, value_,
                       result_))
        return done_ = true;
    auto& d = node_.dispatcher();
    return node_.with_route(peer_, "co_await", [&](Endpoint& ep, Peer to) __attribute__((always_inline)) {
        // A small write is injected: complete on return, with no context, no
        // slot and nothing to take from the queue (as cheap as the blocking path's).
        if (kind_ == Kind::write && ep.write_injected(local_, remote_, offset_, to)) {
            result_ = Completion{.op = Op::write, .len = local_.len};
            return done_ = true;
        }
        slot_ = d.take(this, 0, peer_, false);
        try {
            switch (kind_) {
            case Kind::write: ep.write(local_, remote_, offset_, slot_, to); break;
            case Kind::read: ep.read(local_, remote_, offset_, slot_, to); break;
            case Kind::write_notify: ep.write_notify(local_, remote_, offset_, value_, slot_, to); break;
            case Kind::send: ep.send(local_, slot_, to); break;
            }
        } catch (...) {
            d.release(std::exchange(slot_, nullptr));
            throw;
        }
        // One look at the queue before suspending, as a blocking wait's first
        // poll: an operation the provider completed within its post (shm's
        // copies, a write the socket took) resumes nobody and costs no suspension.
        // The slot counts as in flight only if it stays so (drained(), lost peers).
        auto look = Completions::Look::other;
        try {
            look = node_.completions().look_once(slot_, result_);
        } catch (const Error& e) { // a failed operation: this one's, or another awaiter's
            if (!d.owns(e.context())) {
                d.posted(slot_);
                throw;
            }
            const bool own = e.context() == static_cast<void*>(slot_);
            d.complete(static_cast<Slot*>(e.context()), Completion{}, std::current_exception());
            if (own) // completed(): done, with the error; the slot is free
                return done_;
        } catch (...) { // not libfabric's (no memory): the slot flies, counted as such
            d.posted(slot_);
            throw;
        }
        if (look == Completions::Look::mine) [[likely]] {
            d.finish(std::exchange(slot_, nullptr)); // never counted as in flight
            return done_ = true;
        }
        d.posted(slot_);
        if (look == Completions::Look::other) {
            result_ = Completion{};
            try {
                node_.route(slot_, &result_); // what was read or held back, this one's too
            } catch (...) { // another's failure, after route() may have taken (freed) this one
                if (result_.context == slot_)
                    slot_ = nullptr, done_ = true;
                throw;
            }
            if (result_.context == slot_) // taken by route(), which freed the slot
                slot_ = nullptr, done_ = true;
        }
        return done_;
    });
}

void OpAwait::completed(std::uint32_t, const Completion& c, const std::exception_ptr& error) noexcept
{
    slot_ = nullptr; // freed by the dispatcher
    result_ = c;
    error_ = error;
    done_ = true;
    node_.dispatcher().ready(*this);
}

void OpAwait::give_up(Early) noexcept
{
    if (slot_)
        node_.dispatcher().release(std::exchange(slot_, nullptr));
}

Completion OpAwait::resume_slow()
{
    on_stop_.reset();
    if (early != Early::no && !done_)
        throw_early(early, "the operation's completion", peer_);
    if (error_)
        std::rethrow_exception(error_);
    return result_;
}

// ---- NoteAwait ----

NoteAwait::~NoteAwait()
{
    node_.dispatcher().unlisten(*this);
    if (linked)
        unpark(*this);
}

bool NoteAwait::await_ready()
{
    return node_.take_kept(*this);
}

void NoteAwait::await_suspend(std::coroutine_handle<> h)
{
    node_.dispatcher().listen(*this);
    park(*this, h, from_);
}

bool NoteAwait::offer(const Completion& c) noexcept
{
    if (done_ || c.op != op_ || (from_ && c.peer != from_))
        return false;
    result_ = c;
    done_ = true;
    node_.dispatcher().unlisten(*this);
    node_.dispatcher().ready(*this);
    return true;
}

void NoteAwait::give_up(Early) noexcept
{
    node_.dispatcher().unlisten(*this);
}

Completion NoteAwait::await_resume()
{
    on_stop_.reset();
    if (!done_)
        throw_early(early, op_ == Op::notify ? "a notification" : "a message", from_);
    return result_;
}

// ---- CountAwait ----

CountAwait::~CountAwait()
{
    node_.dispatcher().unlisten(*this);
    if (linked)
        unpark(*this);
}

bool CountAwait::wanted(const Completion& c) const noexcept
{
    if (c.op != Op::notify || got_ >= count_)
        return false;
    for (const PeerId p : from_)
        if (p == c.peer)
            return true;
    return false;
}

bool CountAwait::await_ready()
{
    while (got_ < count_ && node_.take_kept(*this)) {
    }
    return got_ >= count_;
}

void CountAwait::await_suspend(std::coroutine_handle<> h)
{
    node_.dispatcher().listen(*this);
    park(*this, h, PeerId{});
}

bool CountAwait::offer(const Completion& c) noexcept
{
    if (!wanted(c))
        return false;
    if (got_ < out_.size())
        out_[got_] = c;
    if (++got_ == count_) {
        node_.dispatcher().unlisten(*this);
        node_.dispatcher().ready(*this);
    }
    return true;
}

bool CountAwait::waits_on(PeerId gone) const noexcept
{
    for (const PeerId p : from_)
        if (p == gone) {
            const_cast<CountAwait*>(this)->lost_ = gone;
            return true;
        }
    return false;
}

void CountAwait::give_up(Early) noexcept
{
    node_.dispatcher().unlisten(*this);
}

std::size_t CountAwait::await_resume()
{
    on_stop_.reset();
    if (got_ < count_)
        throw_early(early, fmt::format("{} notifications (got {})", count_, got_).c_str(), lost_);
    return got_;
}

} // namespace weft::detail
