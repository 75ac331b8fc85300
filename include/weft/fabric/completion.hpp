// SPDX-License-Identifier: MIT
/// @brief What a completion reports (Completion, Op, the PeerId that caused
/// it), and where completions that do not come from libfabric's queue come
/// from (SideSource: a Node's same-host lane).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace weft {

namespace detail {
struct Tag;
} // namespace detail

/// A peer of a Node: an index into its table of peers (never reused while the
/// Node lives). Completions a peer caused carry it; others carry none.
struct PeerId {
    static constexpr std::uint32_t none = ~0u;
    std::uint32_t index = none;
    explicit operator bool() const noexcept { return index != none; }
    friend bool operator==(PeerId, PeerId) = default;
};

/// What a completion reports.
enum class Op : std::uint8_t {
    send,   ///< a send finished locally (its buffer may be reused)
    recv,   ///< a message arrived: Completion::message
    write,  ///< an RMA write (or write_notify) finished locally
    read,   ///< an RMA read finished: the data is in the local sink
    atomic, ///< a fetch_add / compare_swap finished: the old value is in the result
    notify, ///< a peer's write_notify landed here: Completion::data is its value
};
std::string_view to_string(Op op) noexcept;


struct Completion {
    void* context = nullptr; ///< as given when posting; nullptr for recv and notify
    Op op = Op::send;
    /// Bytes moved by this side's operation, or received (recv). 0 for a
    /// notification on every provider (some report the written length, others
    /// cannot): carry a length in the notification's value if the target needs it.
    std::size_t len = 0;
    std::uint32_t data = 0; ///< notify: the 32-bit value the writer attached
    /// recv: the payload, valid until the next poll / wait call on this queue.
    std::span<const std::byte> message{};
    const detail::Tag* lent = nullptr; ///< internal: the receive slot lent out
    /// notify and recv on a Node's queue: the peer that caused it.
    PeerId peer{};
};

/// Completions that arrive beside the queue (a Node's same-host lane): every
/// read of the queue also takes what it has.
class SideSource {
public:
    /// Fills `out` with what arrived. A message's bytes are lent as a receive
    /// slot's are (Completion::lent, a Tag of Kind::side), and given back by
    /// release(tag index) on the poll after the caller had it.
    virtual std::size_t pull(std::span<Completion> out) = 0;
    virtual void release(std::uint32_t index) noexcept = 0;
    /// True when nothing waits, with wake-ups armed so that the next arrival
    /// makes the Node's descriptor readable (Waiting::sleep).
    virtual bool quiet() noexcept = 0;

protected:
    ~SideSource() = default;
};

} // namespace weft
