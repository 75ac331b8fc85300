// SPDX-License-Identifier: MIT
/// @brief The awaitables Node's awaited calls return (co_await node.write(...,
/// deadline)): each lives in the awaiting coroutine's frame and holds a Slot of
/// the Node's arena while its operation flies. Included at the end of
/// weft/peers/node.hpp; weft/async.hpp says how to use them.
#pragma once

#include <optional>
#include <span>
#include <stop_token>

#include "weft/peers/node.hpp"

namespace weft::detail {

/// Turns a stop token's request into a cancelled flag and a poke (any thread).
struct CancelWaiter {
    Waiter* waiter;
    Dispatcher* dispatcher;
    void operator()() const noexcept
    {
        waiter->cancelled.store(true, std::memory_order_release);
        dispatcher->poke();
    }
};

/// What every awaitable shares: its Node, deadline, stop token and the early end.
class AwaitBase {
protected:
    AwaitBase(Node& node, Deadline deadline, std::stop_token stop) noexcept
        : node_(node), deadline_(deadline), stop_(std::move(stop))
    {
    }
    /// Links `w` and arms the stop token.
    void park(Waiter& w, std::coroutine_handle<> h, PeerId peer);
    /// Unlinks `w` and disarms the stop token (on the owning thread).
    void unpark(Waiter& w) noexcept;
    /// The error of a wait readied early (timeout, cancel, lost), naming `what`.
    [[noreturn]] void throw_early(Waiter::Early why, const char* what, PeerId peer) const;

    Node& node_;
    Deadline deadline_;
    std::stop_token stop_;
    std::optional<std::stop_callback<CancelWaiter>> on_stop_;
};

/// One operation: posted by await_ready, which also takes a completion weft
/// already has (an inject's) so that it does not suspend.
class [[nodiscard]] OpAwait final : public Sink, public Waiter, private AwaitBase {
public:
    enum class Kind : std::uint8_t { write, read, write_notify, send };
    OpAwait(Node& node, Kind kind, PeerId to, Local local, const RemoteRegion& remote,
            std::uint64_t offset, std::uint32_t value, Deadline until, std::stop_token stop)
        : AwaitBase(node, until, std::move(stop)), kind_(kind), peer_(to), local_(local),
          remote_(remote), offset_(offset), value_(value)
    {
    }
    ~OpAwait()
    {
        if (linked || slot_) [[unlikely]]
            abandon();
    }
    OpAwait(const OpAwait&) = delete;
    OpAwait& operator=(const OpAwait&) = delete;

    bool await_ready();
    void await_suspend(std::coroutine_handle<> h) { park(*this, h, peer_); }
    Completion await_resume()
    {
        if (done_ && !error_ && !on_stop_) [[likely]]
            return result_;
        return resume_slow();
    }

private:
    void abandon() noexcept;
    Completion resume_slow();
    void completed(std::uint32_t, const Completion& c, const std::exception_ptr& error) noexcept override;
    void give_up(Early why) noexcept override;

    Kind kind_;
    PeerId peer_;
    Local local_;
    RemoteRegion remote_;
    std::uint64_t offset_;
    std::uint32_t value_;
    Slot* slot_ = nullptr;
    bool done_ = false;
    union {
        Completion result_; // written (trivially: its lifetime begins) when done_ is set
    };
    std::exception_ptr error_;
};

/// The next notification (or message) from one peer, or from any (PeerId{}).
/// A message's bytes stay valid until the awaiting coroutine's next co_await.
class [[nodiscard]] NoteAwait final : public Listener, private AwaitBase {
public:
    NoteAwait(Node& node, Op op, PeerId from, Deadline until, std::stop_token stop)
        : AwaitBase(node, until, std::move(stop)), op_(op), from_(from)
    {
    }
    ~NoteAwait();
    NoteAwait(const NoteAwait&) = delete;
    NoteAwait& operator=(const NoteAwait&) = delete;

    bool await_ready();
    void await_suspend(std::coroutine_handle<> h);
    Completion await_resume();

private:
    bool offer(const Completion& c) noexcept override;
    void give_up(Early why) noexcept override;

    Op op_;
    PeerId from_;
    bool done_ = false;
    Completion result_{};
};

/// `count` notifications from any of `from`, in any order (each kept in `out`
/// while it has room); resumes with how many came.
class [[nodiscard]] CountAwait final : public Listener, private AwaitBase {
public:
    CountAwait(Node& node, std::span<const PeerId> from, std::size_t count,
               std::span<Completion> out, Deadline until, std::stop_token stop)
        : AwaitBase(node, until, std::move(stop)), from_(from), count_(count), out_(out)
    {
    }
    ~CountAwait();
    CountAwait(const CountAwait&) = delete;
    CountAwait& operator=(const CountAwait&) = delete;

    bool await_ready();
    void await_suspend(std::coroutine_handle<> h);
    std::size_t await_resume();

private:
    bool wanted(const Completion& c) const noexcept;
    bool offer(const Completion& c) noexcept override;
    void give_up(Early why) noexcept override;
    bool waits_on(PeerId peer) const noexcept override;

    std::span<const PeerId> from_;
    std::size_t count_;
    std::span<Completion> out_;
    std::size_t got_ = 0;
    PeerId lost_{};
};

} // namespace weft::detail

namespace weft {

inline detail::OpAwait Node::write(PeerId peer, Local src, const RemoteRegion& dst,
                                   std::uint64_t offset, Deadline deadline, std::stop_token stop)
{
    return {*this, detail::OpAwait::Kind::write, peer, src, dst, offset, 0, deadline, std::move(stop)};
}
inline detail::OpAwait Node::read(PeerId peer, Local dst, const RemoteRegion& src,
                                  std::uint64_t offset, Deadline deadline, std::stop_token stop)
{
    return {*this, detail::OpAwait::Kind::read, peer, dst, src, offset, 0, deadline, std::move(stop)};
}
inline detail::OpAwait Node::write_notify(PeerId peer, Local src, const RemoteRegion& dst,
                                          std::uint64_t offset, std::uint32_t value,
                                          Deadline deadline, std::stop_token stop)
{
    return {*this, detail::OpAwait::Kind::write_notify, peer, src, dst, offset, value, deadline,
            std::move(stop)};
}
inline detail::OpAwait Node::send(PeerId peer, Local src, Deadline deadline, std::stop_token stop)
{
    return {*this, detail::OpAwait::Kind::send, peer, src, RemoteRegion{}, 0, 0, deadline, std::move(stop)};
}
inline detail::NoteAwait Node::notification(PeerId from, Deadline deadline, std::stop_token stop)
{
    return {*this, Op::notify, from, deadline, std::move(stop)};
}
inline detail::NoteAwait Node::message(PeerId from, Deadline deadline, std::stop_token stop)
{
    return {*this, Op::recv, from, deadline, std::move(stop)};
}
inline detail::CountAwait Node::notifications(std::span<const PeerId> from, std::size_t count,
                                              Deadline deadline, std::span<Completion> out,
                                              std::stop_token stop)
{
    return {*this, from, count, out, deadline, std::move(stop)};
}

} // namespace weft
