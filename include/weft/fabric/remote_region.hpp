// SPDX-License-Identifier: MIT
/// @brief A peer's registered memory as the initiator sees it: trivially
/// copyable, with a documented, versioned, little-endian wire format.
///
/// Wire format v1 (40 bytes, every integer little-endian):
///
///   offset size field
///   0      4    magic "WFRR"
///   4      1    version (1)
///   5      1    flags: bit0 readable, bit1 writable, bit2 base is a virtual address
///   6      2    reserved, 0
///   8      8    base: the address of byte 0 of the region as the target's provider
///               expects it (its virtual address under FI_MR_VIRT_ADDR, else 0)
///   16     8    length in bytes (> 0; 0 only in the empty descriptor: no region)
///   24     8    key
///   32     4    CRC-32C of bytes 0..31
///   36     4    reserved, 0
///
/// The empty descriptor (RemoteRegion{}: base, length, key and flags all 0)
/// is a value too, "no region": a rank with nothing to expose gives it to
/// Group::all_gather, and every access through it is refused before posting.
///
/// A newer weft may bump the version; decode() rejects versions it does not know.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "weft/base/crc32c.hpp"

namespace weft {

class RemoteRegion {
public:
    static constexpr std::size_t wire_size = 40;
    static constexpr std::uint8_t wire_version = 1;
    using Wire = std::array<std::byte, wire_size>;

    enum Flags : std::uint8_t {
        readable = 1u << 0,
        writable = 1u << 1,
        virt_addr = 1u << 2,
    };

    constexpr RemoteRegion() noexcept = default;
    constexpr RemoteRegion(std::uint64_t base, std::uint64_t length, std::uint64_t key,
                           std::uint8_t flags) noexcept
        : base_(base), length_(length), key_(key), flags_(flags)
    {
    }

    std::uint64_t base() const noexcept { return base_; }
    std::uint64_t length() const noexcept { return length_; }
    std::uint64_t key() const noexcept { return key_; }
    std::uint8_t flags() const noexcept { return flags_; }
    /// The empty descriptor, "no region" (RemoteRegion{}).
    bool empty() const noexcept { return length_ == 0; }
    bool is_readable() const noexcept { return flags_ & readable; }
    bool is_writable() const noexcept { return flags_ & writable; }

    /// The target address of [offset, offset+len) for a write; throws UsageError
    /// before any traffic when the range leaves the region or it is read-only.
    std::uint64_t write_address(std::uint64_t offset, std::size_t len) const
    {
        if (!allows(true, offset, len)) [[unlikely]]
            reject("write", offset, len);
        return base_ + offset;
    }
    /// The same for a read (the region must be readable).
    std::uint64_t read_address(std::uint64_t offset, std::size_t len) const
    {
        if (!allows(false, offset, len)) [[unlikely]]
            reject("read", offset, len);
        return base_ + offset;
    }
    /// What write_address / read_address check, without the error.
    bool allows(bool write, std::uint64_t offset, std::size_t len) const noexcept
    {
        return (flags_ & (write ? writable : readable)) && offset <= length_ && len <= length_ - offset;
    }
    /// For atomics: readable, writable, in bounds and 8-byte aligned.
    std::uint64_t atomic_address(std::uint64_t offset) const;

    Wire encode() const noexcept;
    /// Validates magic, version, flags, reserved bytes, length and checksum;
    /// throws UsageError naming the first defect.
    static RemoteRegion decode(std::span<const std::byte> bytes);

    friend bool operator==(const RemoteRegion&, const RemoteRegion&) = default;

private:
    [[noreturn]] void reject(const char* op, std::uint64_t offset, std::size_t len) const;

    std::uint64_t base_ = 0;
    std::uint64_t length_ = 0;
    std::uint64_t key_ = 0;
    std::uint8_t flags_ = 0;
};

static_assert(std::is_trivially_copyable_v<RemoteRegion>);

} // namespace weft
