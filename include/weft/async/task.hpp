// SPDX-License-Identifier: MIT
/// @brief weft::Task<T>: a lazy coroutine that returns T, for programs with no
/// event loop of their own (node.run(task, deadline)) and for composing
/// coroutines (co_await another Task). Starts when awaited or run; a Task
/// awaited from another resumes it by symmetric transfer.
///
///     weft::Task<int> ping(weft::Node& node, weft::PeerId p, ...) {
///         co_await node.write_notify(p, src, dst, 0, 1, weft::Deadline::after(1s));
///         weft::Completion c = co_await node.notification(p, weft::Deadline::after(1s));
///         co_return static_cast<int>(c.data);
///     }
///     int v = node.run(ping(node, p, ...), weft::Deadline::after(5s));
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "weft/async/loop.hpp"
#include "weft/peers/node.hpp"

namespace weft {

template <class T = void>
class [[nodiscard]] Task {
public:
    struct promise_type;
    using Handle = std::coroutine_handle<promise_type>;

    struct Final {
        bool await_ready() const noexcept { return false; }
        std::coroutine_handle<> await_suspend(Handle h) noexcept { return h.promise().continuation; }
        void await_resume() const noexcept {}
    };
    struct PromiseBase {
        std::coroutine_handle<> continuation = std::noop_coroutine();
        std::exception_ptr error;
        std::suspend_always initial_suspend() const noexcept { return {}; }
        Final final_suspend() const noexcept { return {}; }
        void unhandled_exception() noexcept { error = std::current_exception(); }
    };
    struct ValuePromise : PromiseBase {
        std::optional<T> value;
        template <class U>
        void return_value(U&& v)
        {
            value.emplace(std::forward<U>(v));
        }
    };
    struct VoidPromise : PromiseBase {
        void return_void() const noexcept {}
    };
    struct promise_type : std::conditional_t<std::is_void_v<T>, VoidPromise, ValuePromise> {
        Task get_return_object() noexcept { return Task(Handle::from_promise(*this)); }
    };

    Task(Task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
    Task& operator=(Task&& other) noexcept
    {
        if (this != &other) {
            if (h_)
                h_.destroy();
            h_ = std::exchange(other.h_, {});
        }
        return *this;
    }
    /// Destroys the coroutine, done or not: an awaited operation it left
    /// flying is abandoned (reaped when it completes, delivered to nobody).
    ~Task()
    {
        if (h_)
            h_.destroy();
    }
    bool done() const noexcept { return !h_ || h_.done(); }
    /// Runs it until its first suspension, for a loop that dispatches itself
    /// (several Nodes in one thread, an application's own epoll loop); done()
    /// then says when it ended and result() gives what it returned or threw.
    void start()
    {
        if (!h_)
            throw_no_task();
        if (!std::exchange(started_, true))
            h_.resume();
    }
    T result()
    {
        if (h_.promise().error)
            std::rethrow_exception(h_.promise().error);
        if constexpr (!std::is_void_v<T>)
            return std::move(*h_.promise().value);
    }

    // co_await task: runs it, resuming the awaiter when it ends.
    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept
    {
        h_.promise().continuation = awaiting;
        return h_;
    }
    T await_resume() { return result(); }

    /// node.run(task, deadline): starts it, then dispatches (sleeping or
    /// spinning as the Node's Options::waiting says) until it ends; its
    /// result, or its exception. TimeoutError at the deadline: the Task is
    /// left suspended, and destroying it abandons what it awaited.
    T run_on(Node& node, Deadline deadline)
    {
        start();
        detail::Loop loop(node);
        while (!h_.done())
            loop.turn(deadline, "the task");
        return result();
    }

private:
    explicit Task(Handle h) noexcept : h_(h) {}
    [[noreturn]] static void throw_no_task() { detail::Loop::no_task(); }

    Handle h_;
    bool started_ = false;
};

} // namespace weft
