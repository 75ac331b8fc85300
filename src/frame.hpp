// SPDX-License-Identifier: MIT
// weft's message framing, used only where the provider has no CQ data (iWARP):
// an 8-byte header {version, type, 0, 0, value (u32 little-endian)} in front of
// each message, so a notification and a message can be told apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <rdma/fabric.h>

#include "wire.hpp"

namespace weft::frame {

inline constexpr std::size_t header_size = 8;
inline constexpr std::uint8_t version = 1;
inline constexpr std::uint8_t type_message = 1;
inline constexpr std::uint8_t type_notify = 2;
inline constexpr std::uint8_t type_hello = 3;
/// No payload, ignored by the receiver (its slot reposted and counted): sent
/// by an initiator whose hello may be stalled (Quirks::first_message_can_stall).
inline constexpr std::uint8_t type_nudge = 4;

/// Nudges an initiator may send before the peer's hello; a credit endpoint
/// posts at least one slot more, so that none finds its receive missing.
inline constexpr std::uint32_t max_nudges = 3;

inline constexpr std::size_t hello_size = 8;
inline constexpr std::array<std::byte, hello_size> hello = {
    std::byte{'w'}, std::byte{'e'}, std::byte{'f'}, std::byte{'t'},
    std::byte{'h'}, std::byte{'i'}, std::byte{1},   std::byte{0}};

/// A little-endian u32 at `p` (headers, hellos, credit blocks).
inline void put_u32(std::byte* p, std::uint32_t v) noexcept
{
    wire::put_le(p, v, 4);
}
inline std::uint32_t get_u32(const std::byte* p) noexcept
{
    return static_cast<std::uint32_t>(wire::get_le(p, 4));
}

inline std::uint8_t type_of(const std::byte* h) noexcept
{
    return std::to_integer<std::uint8_t>(h[1]);
}
inline std::uint32_t value_of(const std::byte* h) noexcept
{
    return get_u32(h + 4);
}
inline void write_header(std::byte* h, std::uint8_t type, std::uint32_t value) noexcept
{
    h[0] = std::byte{version};
    h[1] = std::byte{type};
    h[2] = h[3] = std::byte{0};
    put_u32(h + 4, value);
}

} // namespace weft::frame
