// SPDX-License-Identifier: MIT
// Two co-located processes joined by the lane: one UnixChannel for control
// (hellos, regions offered and withdrawn, and the end of the peer), and one
// ring each way for notifications and messages.
//
// Data moves without the peer's involvement:
//  - into or out of a region the peer offered with its Segment (memory weft
//    allocated): a bounds-checked memcpy through this side's mapping of the
//    peer's memfd, mapped read-only unless the region is writable, sealed so
//    that the kernel refuses every write to a read-only one;
//  - into or out of other registered memory: process_vm_writev/readv at the
//    address the peer offered, where the kernel's ptrace check allows it.
// Every access is checked against what the owner offered (key, length,
// access), never against the caller's RemoteRegion alone. A withdrawal
// reaches this side by the channel, and a generation word in the owner's
// ring (one load before each access) sends this side to read the channel
// first: an access begun after withdraw() returned fails. The owner's
// Segment::detach_peers() makes the pages unreachable whatever this side does.
//
// Threading: one thread at a time per Pair.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "ring.hpp"
#include "segment.hpp"
#include "unix_channel.hpp"
#include "weft/base/deadline.hpp"

namespace weft::lane {

/// A region as its owner offers it to a co-located peer.
struct Offer {
    std::uint64_t key = 0;
    std::uint64_t address = 0; ///< its virtual address in the owner
    std::uint64_t length = 0;
    bool readable = false;
    bool writable = false;
};

/// What a ring record is.
enum class RecordKind : std::uint16_t { notify = 1, message = 2 };

class Pair {
public:
    /// Exchanges hellos over `channel` (connected or accepted): each side's
    /// instance and ring. `expected_pid` (when not 0) must be the pid the
    /// kernel recorded for the peer's end of the channel. Throws weft::Error
    /// naming the defect, TimeoutError past `deadline`.
    static Pair open(UnixChannel channel, std::uint64_t my_instance, pid_t expected_pid,
                     std::uint32_t ring_slots, Deadline deadline);

    std::uint64_t peer_instance() const noexcept { return peer_instance_; }
    const Credentials& peer() const noexcept { return peer_; }
    /// For an event loop: readable when the peer sent control or closed.
    int channel_fd() const noexcept { return channel_.fd(); }
    /// For an event loop: readable when the peer woke this side (after arm()).
    int wake_fd() const noexcept { return inbox_.wake_fd(); }

    // ---- the owner's side ----
    /// Tells the peer about a region: with `memory` (a sealed Segment holding
    /// it) the peer maps that; without, it copies with process_vm_*.
    void offer(const Offer& offer, const Segment* memory, Deadline deadline);
    void withdraw(std::uint64_t key, Deadline deadline);

    // ---- the initiator's side ----
    /// Copies `src` into the peer's region `key` at `offset`. Throws UsageError
    /// when the peer offered no such region (or withdrew it), it is not
    /// writable, or the range leaves it; weft::Error when the kernel refuses
    /// the copy (naming why); peer_lost() when the peer has gone.
    void write(std::uint64_t key, std::uint64_t offset, std::span<const std::byte> src);
    void read(std::uint64_t key, std::uint64_t offset, std::span<std::byte> dst);
    /// Whether the peer offered `key` (its channel read first on a miss).
    bool knows(std::uint64_t key);
    /// Through the ring to the peer: false when it is full now.
    bool notify(std::uint32_t value);
    bool send(std::span<const std::byte> message);

    // ---- this side's inbox ----
    std::optional<RingRecord> receive(std::span<std::byte> out) { return inbox_.pop(out); }
    bool arm() noexcept { return inbox_.arm(); }
    void disarm() noexcept { inbox_.disarm(); }
    /// Reads the control messages waiting on the channel (offers, withdrawals).
    /// Throws weft::Error with peer_lost() once the peer has closed its end.
    void tend();

private:
    struct Mapped {
        Offer offer;
        std::unique_ptr<Segment> memory; // none: process_vm_* at offer.address
    };
    Pair(UnixChannel channel, RingReceiver inbox) noexcept
        : channel_(std::move(channel)), inbox_(std::move(inbox))
    {
    }
    const Mapped& region(std::uint64_t key, const char* op)
    {
        if (outbox_->generation() == seen_generation_) [[likely]] {
            const auto it = regions_.find(key);
            if (it != regions_.end()) [[likely]]
                return it->second;
        }
        return region_slow(key, op);
    }
    const Mapped& region_slow(std::uint64_t key, const char* op);
    void handle(UnixChannel::Message& m);
    [[noreturn]] void copy_failed(const char* call, const Mapped& m, std::uint64_t offset,
                                  std::size_t len);

    UnixChannel channel_;
    RingReceiver inbox_;
    std::optional<RingSender> outbox_;
    Credentials peer_{};
    std::uint64_t peer_instance_ = 0;
    std::uint64_t seen_generation_ = 0; // the owner's, when this side last read its channel
    std::unordered_map<std::uint64_t, Mapped> regions_;
};

} // namespace weft::lane
