// SPDX-License-Identifier: MIT
#include "ring.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft::lane {
namespace {

using L = RingLayout;

// The shared words, read and written as atomics in place (std::atomic_ref:
// both ends map the same page, each at its own address).
std::atomic_ref<std::uint64_t> word64(std::byte* p)
{
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p));
}
std::atomic_ref<std::uint32_t> word32(std::byte* p)
{
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(p));
}

std::byte* generation_word(const Segment& s) { return s.data() + 16; }
std::byte* head_word(const Segment& s) { return s.data() + L::line; }
std::byte* asleep_word(const Segment& s) { return s.data() + 2 * L::line; }
std::byte* slot(const Segment& s, std::uint32_t slots, std::uint64_t index)
{
    return s.data() + L::header + (index & (slots - 1)) * L::line;
}

// The slots a record of `length` payload bytes takes.
std::uint32_t span_for(std::size_t length)
{
    if (length <= L::first_payload)
        return 1;
    return static_cast<std::uint32_t>(1 + (length - L::first_payload + L::line - 1) / L::line);
}

[[noreturn]] void corrupt(const std::string& what)
{
    throw Error("lane ring", -EPROTO, "",
                what + ": the peer wrote its side of the ring out of protocol (a bug or a hostile "
                       "peer); the pair is unusable");
}

} // namespace

RingReceiver RingReceiver::create(std::uint32_t slots)
{
    if (slots < 2 || slots > L::max_slots || !std::has_single_bit(slots))
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("a ring of {} slots: a power of two from 2 to {}", slots,
                                     L::max_slots));
    RingReceiver r;
    r.segment_ = Segment::create(L::bytes(slots), "ring");
    r.slots_ = slots;
    std::byte* h = r.segment_.data();
    const std::uint64_t magic = L::magic;
    std::memcpy(h, &magic, 8);
    std::memcpy(h + 8, &L::version, 4);
    std::memcpy(h + 12, &slots, 4);
    r.segment_.seal(PeerAccess::read_write); // the sender writes the slots
    r.wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!r.wake_)
        throw Error("eventfd", -errno, "",
                    fmt::format("the lane ring's wake-up: {}", std::strerror(errno)));
    return r;
}

std::optional<RingRecord> RingReceiver::pop(std::span<std::byte> out)
{
    std::byte* first = slot(segment_, slots_, head_);
    if (word64(first).load(std::memory_order_acquire) != head_ + 1)
        return std::nullopt;
    // Each field read once; from here on only these copies count.
    std::uint16_t kind = 0;
    std::uint16_t span = 0;
    std::uint32_t length = 0;
    std::memcpy(&kind, first + 8, 2);
    std::memcpy(&span, first + 10, 2);
    std::memcpy(&length, first + 12, 4);
    if (length > L::max_payload || span != span_for(length) || span > slots_)
        corrupt(fmt::format("record {} claims {} B in {} slots (a ring of {} slots)", head_, length,
                            span, slots_));
    if (length > out.size())
        throw Error("lane ring", -EMSGSIZE, "",
                    fmt::format("a {} B record for a {} B buffer: the peer sent more than this "
                                "kind of record holds",
                                length, out.size()));
    std::size_t done = std::min<std::size_t>(length, L::first_payload);
    if (done > 0)
        std::memcpy(out.data(), first + 16, done);
    for (std::uint32_t k = 1; k < span; ++k) {
        const std::size_t n = std::min<std::size_t>(length - done, L::line);
        std::memcpy(out.data() + done, slot(segment_, slots_, head_ + k), n);
        done += n;
    }
    // A consumed slot's first word goes back to 0: a continuation slot's stale
    // payload can never pass for a ready record a lap later.
    for (std::uint32_t k = 0; k < span; ++k)
        word64(slot(segment_, slots_, head_ + k)).store(0, std::memory_order_relaxed);
    head_ += span;
    word64(head_word(segment_)).store(head_, std::memory_order_release);
    return RingRecord{kind, length};
}

bool RingReceiver::arm() noexcept
{
    word32(asleep_word(segment_)).store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return !ready();
}

void RingReceiver::disarm() noexcept
{
    word32(asleep_word(segment_)).store(0, std::memory_order_relaxed);
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_.get(), &count, sizeof count);
}

void RingReceiver::bump_generation() noexcept
{
    word64(generation_word(segment_)).store(++generation_, std::memory_order_release);
}

RingSender RingSender::attach(detail::Fd segment_fd, std::size_t size, detail::Fd wake)
{
    if (size < L::bytes(2) || size > L::bytes(L::max_slots) + 4096)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("a peer's ring of {} B cannot be one", size));
    RingSender s;
    s.segment_ = Segment::map(std::move(segment_fd), PeerAccess::read_write, size);
    std::uint64_t magic = 0;
    std::uint32_t version = 0;
    std::uint32_t slots = 0;
    std::memcpy(&magic, s.segment_.data(), 8);
    std::memcpy(&version, s.segment_.data() + 8, 4);
    std::memcpy(&slots, s.segment_.data() + 12, 4);
    if (magic != L::magic || version != L::version)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("the peer's ring is not a weft ring of version {} (magic "
                                     "{:#x}, version {})",
                                     L::version, magic, version));
    if (slots < 2 || slots > L::max_slots || !std::has_single_bit(slots) || L::bytes(slots) > size)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("the peer's ring claims {} slots in {} B", slots, size));
    s.slots_ = slots;
    s.wake_ = std::move(wake);
    return s;
}

std::uint32_t RingSender::room() const
{
    const std::uint64_t head = word64(head_word(segment_)).load(std::memory_order_acquire);
    if (head > tail_ || tail_ - head > slots_)
        corrupt(fmt::format("the receiver's head {} is impossible after {} slots written", head,
                            tail_));
    return static_cast<std::uint32_t>(slots_ - (tail_ - head));
}

bool RingSender::push(std::uint16_t kind, std::span<const std::byte> payload)
{
    if (payload.size() > L::max_payload)
        throw UsageError("lane", -EMSGSIZE, "",
                         fmt::format("a {} B ring record (at most {} B)", payload.size(),
                                     L::max_payload));
    const std::uint32_t span = span_for(payload.size());
    if (span > slots_)
        throw UsageError("lane", -EMSGSIZE, "",
                         fmt::format("a {} B record needs more than the ring's {} slots",
                                     payload.size(), slots_));
    if (room() < span)
        return false;
    std::size_t done = std::min<std::size_t>(payload.size(), L::first_payload);
    for (std::uint32_t k = 1; k < span; ++k) {
        const std::size_t n = std::min<std::size_t>(payload.size() - done, L::line);
        std::memcpy(slot(segment_, slots_, tail_ + k), payload.data() + done, n);
        done += n;
    }
    std::byte* first = slot(segment_, slots_, tail_);
    const auto span16 = static_cast<std::uint16_t>(span);
    const auto length = static_cast<std::uint32_t>(payload.size());
    std::memcpy(first + 8, &kind, 2);
    std::memcpy(first + 10, &span16, 2);
    std::memcpy(first + 12, &length, 4);
    if (!payload.empty())
        std::memcpy(first + 16, payload.data(),
                    std::min<std::size_t>(payload.size(), L::first_payload));
    word64(first).store(tail_ + 1, std::memory_order_release);
    tail_ += span;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (word32(asleep_word(segment_)).load(std::memory_order_relaxed) != 0) {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
    }
    return true;
}

} // namespace weft::lane
