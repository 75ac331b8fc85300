// SPDX-License-Identifier: MIT
// One direction of a co-located pair's notifications and messages: a
// single-producer, single-consumer ring of 64-byte slots in a Segment the
// receiver creates and the sender maps read-write (sent with the receiver's
// eventfd over the pair's UnixChannel).
//
// Layout (every integer native, both ends are one host):
//   line 0   magic, version, slot count (the receiver's; the sender reads them
//            once), and at byte 16 the receiver's generation: a count it bumps
//            when the sender must read the pair's channel before its next
//            operation (a region withdrawn)
//   line 1   head: slots the receiver has consumed (it writes, the sender reads)
//   line 2   asleep: 1 while the receiver sleeps on its eventfd
//   then     the slots. A record takes 1 to max_span consecutive slots
//            (wrapping round the end): its first slot starts with
//            {seq, kind, span, length} and 48 payload bytes; the rest of its
//            slots are payload, 64 B each.
// The sender writes a record's payload and header, then its seq (release):
// seq = the slot's index + 1 (indices count up forever), so a slot last used
// a lap ago never looks ready. The receiver reads seq (acquire), copies the
// record out, and only then publishes its new head; its copy is what it
// interprets. Each end treats the other's words as hostile input: the
// receiver checks span and length against its own slot count and the caller's
// buffer; the sender checks the head it reads against the records it wrote.
// A defect is an Error naming it, never a read or write outside the ring.
//
// Wake-ups: the receiver sets `asleep`, looks once more, then sleeps on its
// eventfd; a sender that finds `asleep` set writes the eventfd. A fence on
// each side between its store and its load makes one of them see the other
// (a record is never slept through); a polling receiver costs the sender no
// system call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "segment.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft::lane {

struct RingLayout {
    static constexpr std::size_t line = 64;
    static constexpr std::size_t header = 3 * line;
    static constexpr std::size_t first_payload = line - 16;
    static constexpr std::uint32_t max_span = 64;
    static constexpr std::uint32_t max_slots = 1u << 20; ///< 64 MiB
    /// The largest record: 4080 B.
    static constexpr std::size_t max_payload = first_payload + (max_span - 1) * line;
    static constexpr std::uint64_t magic = 0x676e6952'7466'6577; // "weftRing", little-endian
    static constexpr std::uint32_t version = 1;

    static std::size_t bytes(std::uint32_t slots) { return header + std::size_t{slots} * line; }
};

/// What pop() found: the record's kind and how many payload bytes it copied.
struct RingRecord {
    std::uint16_t kind;
    std::size_t length;
};

class RingReceiver {
public:
    /// A ring of `slots` slots (a power of two, 2 to max_slots) and its eventfd.
    static RingReceiver create(std::uint32_t slots);

    /// To send to the sender: the segment's descriptor and size, and the eventfd.
    const Segment& segment() const noexcept { return segment_; }
    int wake_fd() const noexcept { return wake_.get(); }
    std::uint32_t slots() const noexcept { return slots_; }

    /// The next record, its payload copied into `out`; none when the ring is
    /// empty. Throws weft::Error when the sender wrote a malformed record
    /// (or one longer than `out`); the ring is unusable then.
    std::optional<RingRecord> pop(std::span<std::byte> out);
    /// Whether a record waits (pop would return one): one load, inline, as a
    /// poll with nothing on the lane costs no call.
    bool ready() const noexcept
    {
        std::byte* first =
            segment_.data() + RingLayout::header + (head_ & (slots_ - 1)) * RingLayout::line;
        return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(first))
                   .load(std::memory_order_acquire) == head_ + 1;
    }

    /// Before sleeping on wake_fd(): false when a record came meanwhile (then
    /// pop it and do not sleep; the ring stays armed until disarm()).
    bool arm() noexcept;
    /// After waking (or not sleeping): clears `asleep` and drains the eventfd.
    void disarm() noexcept;
    /// Tells the sender to look at the pair's channel before its next operation.
    void bump_generation() noexcept;

private:
    Segment segment_;
    detail::Fd wake_;
    std::uint32_t slots_ = 0;
    std::uint64_t head_ = 0; // this end's own count; the shared word is only its copy
    std::uint64_t generation_ = 0;
};

class RingSender {
public:
    /// Maps what a receiver sent (`fd` of `size` bytes, its eventfd) and checks
    /// its header; UsageError naming the defect when it is not a ring of this
    /// version.
    static RingSender attach(detail::Fd segment_fd, std::size_t size, detail::Fd wake);

    /// Copies one record in; false when it does not fit now (the receiver is
    /// behind: try again after it has consumed). Throws UsageError when
    /// `payload` exceeds RingLayout::max_payload, weft::Error when the
    /// receiver's head is impossible (a corrupt or hostile receiver).
    bool push(std::uint16_t kind, std::span<const std::byte> payload);
    /// Slots free now, as the receiver's head says.
    std::uint32_t room() const;
    std::uint32_t slots() const noexcept { return slots_; }
    /// The receiver's generation (RingReceiver::bump_generation), at byte 16:
    /// read before every write or read of the peer's memory, so inline.
    std::uint64_t generation() const noexcept
    {
        return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(segment_.data() + 16))
            .load(std::memory_order_acquire);
    }

private:
    Segment segment_;
    detail::Fd wake_;
    std::uint32_t slots_ = 0;
    std::uint64_t tail_ = 0;
};

} // namespace weft::lane
