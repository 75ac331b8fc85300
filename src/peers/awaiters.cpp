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

OpAwait::~OpAwait()
{
    if (linked) // a frame destroyed while suspended (a Task dropped)
        unpark(*this);
    if (slot_)
        node_.dispatcher().release(slot_); // abandoned: reaped when it completes
}

bool OpAwait::await_ready()
{
    // A small write is injected: complete on return, with no context, no slot
    // and nothing to take from the queue (as cheap as the blocking path's).
    if (kind_ == Kind::write && node_.write_injected(peer_, local_, remote_, offset_)) {
        result_ = Completion{.op = Op::write, .len = local_.len};
        done_ = true;
        return true;
    }
    auto& d = node_.dispatcher();
    slot_ = d.take(this, 0, peer_, false);
    try {
        switch (kind_) {
        case Kind::write:
            node_.write(peer_, local_, remote_, offset_, static_cast<void*>(slot_));
            break;
        case Kind::read:
            node_.read(peer_, local_, remote_, offset_, static_cast<void*>(slot_));
            break;
        case Kind::write_notify:
            node_.write_notify(peer_, local_, remote_, offset_, value_, static_cast<void*>(slot_));
            break;
        case Kind::send:
            node_.send(peer_, local_, static_cast<void*>(slot_));
            break;
        }
    } catch (...) {
        d.release(std::exchange(slot_, nullptr));
        throw;
    }
    d.posted(slot_);
    // One look at the queue before suspending, as a blocking wait's first
    // poll: an operation the provider completed within its post (shm's
    // copies, a write the socket took) resumes nobody and costs no suspension.
    node_.route();
    return done_;
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

Completion OpAwait::await_resume()
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
