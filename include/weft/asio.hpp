// SPDX-License-Identifier: MIT
/// @brief weft in an Asio event loop (standalone Asio 1.22, Debian's
/// libasio-dev; header-only and opt-in: include this header and Asio's).
///
///     asio::io_context io;
///     auto node = weft::Node::open(options_with_waiting_sleep);
///     weft::asio::Pump pump(io, node);             // sleeps on node->fd() inside io
///     asio::co_spawn(io, [&]() -> asio::awaitable<void> {
///         weft::Completion c = co_await weft::asio::async_write(
///             pump, peer, src, dst, 0, weft::Deadline::after(1s), asio::use_awaitable);
///     }, asio::detached);
///     io.run();
///
/// Which thread runs what: the Pump's handler runs Node::dispatch() on a
/// thread running the io_context (run one thread, or a strand: a Node is used
/// by one thread at a time). Every operation posts on the thread that starts
/// it, which must be that thread too. A completion handler never runs inside
/// dispatch(): it is posted to its own executor, or to the io_context's when it
/// has none (an operation takes the Pump, as an Asio I/O object's take theirs). The Pump waits on the
/// Node's descriptor, which Asio registers edge-triggered: trywait() is asked
/// after each dispatch, right before waiting on (or keeping the wait for) the
/// next edge, and a timer (at most 100 ms, sooner for an awaited deadline)
/// dispatches even if an edge was missed.
/// Operations take any completion token (use_awaitable, a callback, use_future)
/// with the signature void(std::exception_ptr, Result); a cancellation slot
/// bound to the token cancels the wait (not the wire: Node::drained).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <unistd.h>
#include <utility>

#include <asio.hpp>

#include "weft/async.hpp"

namespace weft::asio {

/// Drives one Node from an io_context. The Node must sleep (Options::waiting =
/// Waiting::sleep: Node::fd() >= 0); UsageError otherwise.
class Pump {
public:
    Pump(::asio::io_context& io, std::shared_ptr<Node> node)
        : node_(std::move(node)), wait_(io), timer_(io), state_(std::make_shared<bool>(true))
    {
        if (node_->fd() < 0)
            throw UsageError("weft::asio::Pump", -FI_EINVAL, std::string(node_->provider()),
                             "the Node does not sleep: open it with Options::waiting = "
                             "Waiting::sleep, so that it has a descriptor to wait on");
        wait_.assign(::dup(node_->fd()));
        arm();
    }
    ~Pump() { *state_ = false; }
    Pump(const Pump&) = delete;
    Pump& operator=(const Pump&) = delete;
    Node& node() const noexcept { return *node_; }
    /// The io_context's executor: where a handler without an executor of its own runs.
    ::asio::any_io_executor get_executor() noexcept { return wait_.get_executor(); }
    /// Dispatches until nothing is left (what an operation that finished at
    /// once readied, too), then waits again.
    void pump()
    {
        for (int i = 0; i < 64 && node_->dispatch() > 0; ++i) {
        }
        arm();
    }

private:
    void arm()
    {
        const std::weak_ptr<bool> alive = state_;
        arm_timer(alive);
        if (!node_->trywait()) { // something is pending: dispatch it first
            ::asio::post(wait_.get_executor(), [this, alive] {
                if (auto a = alive.lock(); a && *a)
                    pump();
            });
            return;
        }
        if (waiting_)
            return; // the wait posted earlier still stands (the descriptor's edge ends it)
        waiting_ = true;
        wait_.async_wait(::asio::posix::stream_descriptor::wait_read,
                         [this, alive](const std::error_code&) {
                             if (auto a = alive.lock(); a && *a) {
                                 waiting_ = false;
                                 pump();
                             }
                         });
    }
    /// The safety timer: set again only when it is not pending or a nearer
    /// deadline came (a timer set on every wake-up costs two timerfd calls).
    void arm_timer(const std::weak_ptr<bool>& alive)
    {
        const auto when = std::min(Clock::now() + std::chrono::milliseconds(100),
                                   node_->dispatcher().next_deadline().when());
        if (timing_ && when >= timer_at_)
            return;
        timing_ = true;
        timer_at_ = when;
        const std::uint64_t generation = ++timer_generation_;
        timer_.expires_at(when); // a pending wait of an earlier setting ends aborted
        timer_.async_wait([this, alive, generation](const std::error_code& ec) {
            auto a = alive.lock();
            if (ec || !a || !*a || generation != timer_generation_)
                return;
            timing_ = false;
            pump();
        });
    }

    std::shared_ptr<Node> node_;
    ::asio::posix::stream_descriptor wait_;
    ::asio::steady_timer timer_;
    std::shared_ptr<bool> state_;
    bool waiting_ = false;                 // an async_wait on the descriptor is pending
    bool timing_ = false;                  // the safety timer is pending, due at timer_at_
    Clock::time_point timer_at_{};
    std::uint64_t timer_generation_ = 0;
};

namespace detail {

/// One weft awaitable driven for an Asio handler: readied inside dispatch(),
/// its handler posted to the handler's executor.
template <class Awaitable, class Result, class Handler>
class Op {
public:
    template <class Make>
    Op(Pump& pump, Make&& make, Handler&& h) : pump_(pump), aw_(make()), handler_(std::move(h))
    {
    }
    static void start(Op* op)
    {
        bool ready = false;
        try {
            ready = op->aw_.await_ready();
        } catch (...) {
            op->finish(std::current_exception());
            return;
        }
        if (ready) {
            op->finish(nullptr);
            return;
        }
        auto slot = ::asio::get_associated_cancellation_slot(op->handler_);
        if (slot.is_connected())
            slot.assign([op](::asio::cancellation_type) {
                op->aw_.cancelled.store(true, std::memory_order_release);
                op->pump_.node().dispatcher().poke();
            });
        op->aw_.on_resume = [](void* self) noexcept { static_cast<Op*>(self)->finish(nullptr); };
        op->aw_.resume_arg = op;
        op->aw_.await_suspend(std::noop_coroutine());
    }

private:
    void finish(std::exception_ptr error) noexcept
    {
        std::optional<Result> result;
        if (!error) {
            try {
                if constexpr (std::is_void_v<decltype(aw_.await_resume())>) {
                    aw_.await_resume();
                    result.emplace();
                } else {
                    result.emplace(aw_.await_resume());
                }
            } catch (...) {
                error = std::current_exception();
            }
        }
        if (!result)
            result.emplace();
        auto slot = ::asio::get_associated_cancellation_slot(handler_);
        if (slot.is_connected())
            slot.clear();
        // Moved out, then this op freed, then the handler posted to its own
        // executor (the Pump's io_context's when it has none): it never runs
        // inside dispatch(), and may start the next operation at once.
        Handler h = std::move(handler_);
        auto ex = ::asio::get_associated_executor(h, pump_.get_executor());
        auto alloc = ::asio::get_associated_allocator(h);
        using Alloc = typename std::allocator_traits<decltype(alloc)>::template rebind_alloc<Op>;
        Alloc a(alloc);
        std::allocator_traits<Alloc>::destroy(a, this);
        std::allocator_traits<Alloc>::deallocate(a, this, 1);
        ::asio::post(ex, [h = std::move(h), error, r = std::move(*result)]() mutable {
            std::move(h)(error, std::move(r));
        });
    }

    Pump& pump_;
    Awaitable aw_;
    Handler handler_;
};

struct Nothing {};

template <class Awaitable, class Result, class Token, class Make>
auto initiate(Pump& pump, Make make, Token&& token)
{
    return ::asio::async_initiate<Token, void(std::exception_ptr, Result)>(
        [&pump, make](auto handler) mutable {
            using H = decltype(handler);
            using O = Op<Awaitable, Result, H>;
            auto alloc = ::asio::get_associated_allocator(handler);
            using Alloc = typename std::allocator_traits<decltype(alloc)>::template rebind_alloc<O>;
            Alloc a(alloc);
            O* op = std::allocator_traits<Alloc>::allocate(a, 1);
            try {
                std::allocator_traits<Alloc>::construct(a, op, pump, make, std::move(handler));
            } catch (...) {
                std::allocator_traits<Alloc>::deallocate(a, op, 1);
                throw;
            }
            O::start(op);
        },
        token);
}

} // namespace detail

// ---- operations: each as Node's awaited call of the same name ----

template <class Token>
auto async_write(Pump& pump, PeerId peer, Local src, const RemoteRegion& dst, std::uint64_t offset,
                 Deadline deadline, Token&& token)
{
    return detail::initiate<weft::detail::OpAwait, Completion>(
        pump, [&node = pump.node(), peer, src, dst, offset, deadline] { return node.write(peer, src, dst, offset, deadline); },
        std::forward<Token>(token));
}

template <class Token>
auto async_read(Pump& pump, PeerId peer, Local dst, const RemoteRegion& src, std::uint64_t offset,
                Deadline deadline, Token&& token)
{
    return detail::initiate<weft::detail::OpAwait, Completion>(
        pump, [&node = pump.node(), peer, dst, src, offset, deadline] { return node.read(peer, dst, src, offset, deadline); },
        std::forward<Token>(token));
}

template <class Token>
auto async_write_notify(Pump& pump, PeerId peer, Local src, const RemoteRegion& dst,
                        std::uint64_t offset, std::uint32_t value, Deadline deadline, Token&& token)
{
    return detail::initiate<weft::detail::OpAwait, Completion>(
        pump, [&node = pump.node(), peer, src, dst, offset, value, deadline] {
            return node.write_notify(peer, src, dst, offset, value, deadline);
        },
        std::forward<Token>(token));
}

/// The next notification from `from` (PeerId{}: anyone).
template <class Token>
auto async_notification(Pump& pump, PeerId from, Deadline deadline, Token&& token)
{
    return detail::initiate<weft::detail::NoteAwait, Completion>(
        pump, [&node = pump.node(), from, deadline] { return node.notification(from, deadline); },
        std::forward<Token>(token));
}

/// Until `transfer` (posted) completed; its first failure as the exception.
template <class Token>
auto async_wait(Pump& pump, Transfer& transfer, Deadline deadline, Token&& token)
{
    return detail::initiate<weft::detail::TransferAwait, detail::Nothing>(
        pump, [&transfer, deadline] { return transfer.done(deadline); }, std::forward<Token>(token));
}

} // namespace weft::asio
