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
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

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

/// What a ring record is. A message longer than one record goes as a
/// message_first (its total length, then bytes) and message_more records,
/// all in the ring at once; receive() hands it out whole, as a message.
/// A note is a notification with a payload (a Transfer's): its value, then
/// the payload, in one record.
enum class RecordKind : std::uint16_t {
    notify = 1,
    message = 2,
    message_first = 3,
    message_more = 4,
    note = 5,
};

class Pair {
public:
    /// Exchanges hellos over `channel` (connected or accepted): each side's
    /// instance and ring. `expected_pid` (when not 0) must be the pid the
    /// kernel recorded for the peer's end of the channel. Throws weft::Error
    /// naming the defect, TimeoutError past `deadline`.
    static Pair open(UnixChannel channel, std::uint64_t my_instance, pid_t expected_pid,
                     std::uint32_t ring_slots, Deadline deadline);
    /// The same in steps, for an end that must not wait for its peer:
    /// start() sends this side's hello (offers may follow at once) unless
    /// `say_hello` is false: then hello() does, once this side has decided to
    /// take the peer (an accepting end reads the peer's hello first, to know
    /// who it is). finish() takes the peer's hello when it has come by
    /// `deadline` (ready() then).
    static Pair start(UnixChannel channel, std::uint64_t my_instance, pid_t expected_pid,
                      std::uint32_t ring_slots, Deadline deadline, bool say_hello = true);
    void hello(Deadline deadline);
    bool said_hello() const noexcept { return said_hello_; }
    bool finish(Deadline deadline);
    bool ready() const noexcept { return outbox_.has_value(); }

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
    /// After the offers of every region there was when the pair began: the
    /// peer, missing a key, waits for this before it says there is none.
    void offered(Deadline deadline);
    /// Tells the peer, before this side first posts to it through libfabric,
    /// that its provider's queue may bring something of this side's: until
    /// then a sleeping peer need not look at a queue without a descriptor
    /// (shm). Once per pair; false when the peer's end is gone.
    bool say_fabric(Deadline deadline);
    /// Whether the peer said it (say_fabric) on this pair.
    bool peer_uses_fabric() const noexcept { return peer_uses_fabric_; }

    // ---- the initiator's side ----
    /// Where in a region an access lands: `target` is an offset from the
    /// region's start, or (`virtual_address`) an address in the owner's
    /// address space, as a RemoteRegion under FI_MR_VIRT_ADDR says.
    struct Target {
        std::uint64_t key;
        std::uint64_t target;
        bool virtual_address = false;
    };
    /// Copies `src` into the peer's region. Throws UsageError when the peer
    /// offered no such region (or withdrew it), it is not writable, or the
    /// range leaves it; weft::Error when the kernel refuses the copy (naming
    /// why); peer_lost() when the peer has gone.
    void write(const Target& to, std::span<const std::byte> src)
    {
        const Mapped& m = region(to.key, "write");
        const std::uint64_t at = position(m, to, src.size(), true);
        if (m.memory && !src.empty()) [[likely]] { // a segment: inline, a memcpy
            std::memcpy(reinterpret_cast<std::byte*>(m.offer.address + at), src.data(), src.size());
            return;
        }
        copy_other(m, at, const_cast<std::byte*>(src.data()), src.size(), true);
    }
    void read(const Target& from, std::span<std::byte> dst)
    {
        const Mapped& m = region(from.key, "read");
        const std::uint64_t at = position(m, from, dst.size(), false);
        if (m.memory && !dst.empty()) [[likely]] {
            std::memcpy(dst.data(), reinterpret_cast<const std::byte*>(m.offer.address + at),
                        dst.size());
            return;
        }
        copy_other(m, at, dst.data(), dst.size(), false);
    }
    /// Where [target, +len) of the peer's region `key` is mapped on this side,
    /// when an access is a plain copy: the region used last, a segment, the
    /// access allowed, in bounds, no withdrawal since. nullptr otherwise, and
    /// then write()/read() say why (Node's fast path, node_lane.cpp).
    std::byte* mapped_at(const Target& t, std::size_t len, bool write) const noexcept
    {
        const Mapped* m = cached(t.key);
        std::uint64_t at = 0;
        if (m == nullptr || !m->memory || len == 0 || !fits(*m, t, len, write, at)) [[unlikely]]
            return nullptr;
        return reinterpret_cast<std::byte*>(m->offer.address + at);
    }
    /// Whether the peer offered `key` (its channel read first on a miss).
    bool knows(std::uint64_t key);
    /// Whether this side can copy to and from the peer's region `key`: a
    /// segment it mapped, or memory process_vm_* reaches (the kernel allowed
    /// the probe at the hello). Throws the refusal write/read would when the
    /// peer offered no such region.
    bool copies(std::uint64_t key, const char* op)
    {
        const Mapped& m = region(key, op);
        return m.memory != nullptr || cross_copy_refused_.empty();
    }
    /// Why the kernel refuses process_vm_* to the peer (ptrace permission:
    /// another user, Yama's ptrace_scope, a non-dumpable peer), probed once the
    /// hello came; empty when it allows it.
    const std::string& cross_copy_refused() const noexcept { return cross_copy_refused_; }
    /// Through the ring to the peer: false when it has no room now (then
    /// nothing of it was sent).
    bool notify(std::uint32_t value);
    bool send(std::span<const std::byte> message);
    /// Up to RingLayout::max_payload - 4 bytes of payload (UsageError beyond).
    bool note(std::uint32_t value, std::span<const std::byte> payload);

    // ---- this side's inbox ----
    /// The next notification or whole message, copied into `out`; none when
    /// nothing (whole) waits. Throws weft::Error when the peer broke the
    /// protocol, or a message is longer than `out`.
    std::optional<RingRecord> receive(std::span<std::byte> out);
    /// Whether a record waits in the inbox (receive() may return something).
    bool waiting() const noexcept { return inbox_.ready(); }
    bool arm() noexcept { return inbox_.arm(); }
    void disarm() noexcept { inbox_.disarm(); }
    /// Reads the control messages waiting on the channel (offers, withdrawals).
    /// Throws weft::Error with peer_lost() once the peer has closed its end.
    /// Before ready(), finishes the hello if it has come.
    void tend();

private:
    struct Mapped {
        Offer offer;                     // address: where this side reaches byte 0
        std::uint64_t owner_address = 0; // byte 0 in the owner's address space
        std::unique_ptr<Segment> memory; // none: process_vm_* at offer.address
    };
    /// Whether the access is allowed and [target, +len) lies in `m`; `at`: its offset there.
    static bool fits(const Mapped& m, const Target& t, std::size_t len, bool write,
                     std::uint64_t& at) noexcept
    {
        at = t.virtual_address ? t.target - m.owner_address : t.target;
        return (write ? m.offer.writable : m.offer.readable) &&
               !(t.virtual_address && t.target < m.owner_address) && at <= m.offer.length &&
               len <= m.offer.length - at;
    }
    /// The offset of [target, +len) in `m`, checked; UsageError otherwise.
    std::uint64_t position(const Mapped& m, const Target& t, std::size_t len, bool write)
    {
        std::uint64_t at = 0;
        if (!fits(m, t, len, write, at)) [[unlikely]]
            refuse_position(m, t.key, at, len, write);
        return at;
    }
    [[noreturn]] void refuse_position(const Mapped& m, std::uint64_t key, std::uint64_t at,
                                      std::size_t len, bool write);
    Pair(UnixChannel channel, RingReceiver inbox) noexcept
        : channel_(std::move(channel)), inbox_(std::move(inbox))
    {
    }
    /// The region used last, if it is `key` and nothing was withdrawn since.
    const Mapped* cached(std::uint64_t key) const noexcept
    {
        return outbox_->generation() == seen_generation_ && key == last_key_ ? last_ : nullptr;
    }
    const Mapped& region(std::uint64_t key, const char* op)
    {
        if (const Mapped* m = cached(key)) [[likely]]
            return *m;
        if (outbox_->generation() == seen_generation_) {
            const auto it = regions_.find(key);
            if (it != regions_.end()) [[likely]] {
                last_key_ = key;
                last_ = &it->second;
                return it->second;
            }
        }
        return region_slow(key, op);
    }
    const Mapped& region_slow(std::uint64_t key, const char* op);
    void handle(UnixChannel::Message& m);
    /// write()/read() where `m` is not a segment (or nothing is copied).
    void copy_other(const Mapped& m, std::uint64_t at, std::byte* here, std::size_t len,
                    bool write);
    /// [at, +len) of `m` and `here`, by process_vm_writev (`write`) or _readv.
    void cross_copy(const Mapped& m, std::uint64_t at, std::byte* here, std::size_t len, bool write);
    [[noreturn]] void copy_failed(const char* call, const Mapped& m, std::uint64_t offset,
                                  std::size_t len);

    UnixChannel channel_;
    RingReceiver inbox_;
    std::optional<RingSender> outbox_;
    Credentials peer_{};
    std::uint64_t peer_instance_ = 0;
    std::uint64_t instance_ = 0; // this side's, for its hello
    bool said_hello_ = false;
    bool all_offered_ = false; // the peer's first offers are all here
    bool said_fabric_ = false;      // say_fabric()
    bool peer_uses_fabric_ = false; // the peer's say_fabric()
    std::uint64_t seen_generation_ = 0; // the owner's, when this side last read its channel
    std::string cross_copy_refused_;    // copies(): why process_vm_* cannot reach the peer
    std::vector<std::byte> partial_;    // a long message arriving in parts
    std::size_t partial_total_ = 0;
    std::unordered_map<std::uint64_t, Mapped> regions_;
    // The region used last: most operations go to the one they went to before.
    // Forgotten whenever regions_ changes (handle()).
    std::uint64_t last_key_ = 0;
    const Mapped* last_ = nullptr;
};

} // namespace weft::lane
