// SPDX-License-Identifier: MIT
/// @brief The per-peer state an Endpoint keeps beside its ActiveEndpoint:
/// receive slots, the scratch ring of frame headers and atomic operands, the
/// credit window of transports where a message without a posted receive is
/// fatal (iWARP), and the hello handshake. Each holds data and the rules on
/// it; the Endpoint does the posting. Included by weft/fabric/endpoint.hpp.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <memory>

#include "weft/fabric/memory_region.hpp"
#include "weft/fabric/remote_region.hpp"

namespace weft {
class Endpoint;
}

namespace weft::detail {

/// A registered block cut into `count` receive slots of `size` bytes each:
/// messages and (on FI_RX_CQ_DATA providers) notifications land here.
class ReceiveSlots {
public:
    void allocate(const std::shared_ptr<Domain>& domain, std::size_t count, std::size_t size,
                  const Endpoint* owner)
    {
        mr_ = MemoryRegion::allocate(domain, count * size, Access::local, owner);
        count_ = count;
        size_ = size;
    }
    std::size_t count() const noexcept { return count_; }
    std::size_t size() const noexcept { return size_; }
    std::byte* operator[](std::size_t slot) const noexcept { return mr_->data() + slot * size_; }
    void* desc() const noexcept { return mr_->desc(); }
    const std::shared_ptr<MemoryRegion>& region() const noexcept { return mr_; }

private:
    std::shared_ptr<MemoryRegion> mr_;
    std::size_t count_ = 0;
    std::size_t size_ = 0;
};

/// Registered scratch entries handed out in turn, one per transmit slot: a
/// frame header or an atomic's operands lives in one until its post completes.
class Scratch {
public:
    struct Entry {
        std::uint64_t operand;
        std::uint64_t compare;
    };
    void allocate(const std::shared_ptr<Domain>& domain, std::size_t count, const Endpoint* owner)
    {
        mr_ = MemoryRegion::allocate(domain, count * sizeof(Entry), Access::local, owner);
        count_ = count;
    }
    Entry* next() noexcept
    {
        auto* e = reinterpret_cast<Entry*>(mr_->data()) + next_;
        next_ = next_ + 1 == count_ ? 0 : next_ + 1;
        return e;
    }
    void* desc() const noexcept { return mr_->desc(); }
    const std::shared_ptr<MemoryRegion>& region() const noexcept { return mr_; }

private:
    std::shared_ptr<MemoryRegion> mr_;
    std::size_t count_ = 0;
    std::size_t next_ = 0;
};

/// Credit-based flow control (see src/fabric/endpoint_flow.cpp): the peer's receive
/// slots, the messages sent so far, and the slots handed back. The peer writes
/// how many slots it has reposted, by RMA, into this side's counter; this side
/// sends only while sent < peer slots + that count. Off (every call a no-op
/// that allows) until open().
class CreditWindow {
public:
    /// The hello's credit block: this side's slot count (u32) and counter region.
    static constexpr std::size_t block_size = 4 + RemoteRegion::wire_size;
    /// The control region: [0,8) the counter the peer writes, [8,64) staging
    /// for this side's hello.
    void open(const std::shared_ptr<Domain>& domain, const Endpoint* owner);
    bool on() const noexcept { return mr_ != nullptr; }
    std::byte* staging() const noexcept { return mr_->data() + 8; }
    void* desc() const noexcept { return mr_->desc(); }
    const std::shared_ptr<MemoryRegion>& region() const noexcept { return mr_; }

    void encode_block(std::byte* out, std::uint32_t own_slots) const;
    /// Takes the peer's block; false when it offers no slots.
    bool decode_block(const std::byte* block);

    /// Spends a slot of the peer's when one is free.
    bool try_take() noexcept
    {
        if (sent_ >= peer_slots_ + returned())
            return false;
        ++sent_;
        return true;
    }
    /// Spends one whether free or not (a nudge: the peer holds slots for them).
    void spend() noexcept { ++sent_; }
    /// A slot of this side's reposted: the peer may use it again once granted.
    void reposted() noexcept { ++reposted_; }
    /// The count to write into the peer's counter when at least `threshold`
    /// slots wait to be granted, else 0; granted() once the write is posted.
    std::uint64_t grant_due(std::uint64_t threshold) const noexcept
    {
        return reposted_ - granted_ >= threshold ? reposted_ : 0;
    }
    void granted(std::uint64_t count) noexcept { granted_ = count; }
    const RemoteRegion& peer_counter() const noexcept { return peer_counter_; }

    std::uint64_t peer_slots() const noexcept { return peer_slots_; }
    std::uint64_t sent() const noexcept { return sent_; }
    /// The slots the peer has handed back so far.
    std::uint64_t returned() const noexcept;

private:
    std::shared_ptr<MemoryRegion> mr_;
    RemoteRegion peer_counter_;
    std::uint64_t peer_slots_ = 0;
    std::uint64_t sent_ = 0;
    std::uint64_t reposted_ = 0;
    std::uint64_t granted_ = 0;
};

/// Where an MSG endpoint's handshake stands. The initiator sends weft's hello
/// first (iWARP requires it); an acceptor's first message must be the peer's.
struct Handshake {
    bool awaiting = false;     // the peer's hello has not arrived
    bool connected = false;    // FI_CONNECTED arrived (acceptor)
    bool due = false;          // a hello to send after the current drain
    bool exchange_ids = false; // a Node's: hellos carry each side's id of the other
    bool initiator = false;
    std::uint32_t nudges = 0;  // sent while awaiting the acceptor's hello
    std::chrono::steady_clock::time_point since{}; // FI_CONNECTED, for the nudges' times
};

} // namespace weft::detail
