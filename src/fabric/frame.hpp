// SPDX-License-Identifier: MIT
// weft's message framing, used only where the provider has no CQ data (iWARP):
// an 8-byte header {version, type, 0, 0, value (u32 little-endian)} in front of
// each message, so a notification and a message can be told apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

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

/// A notification with a payload (Endpoint::send_note).
inline constexpr std::uint8_t type_note = 5;
/// Where there is CQ data, a note is a message whose CQ data's lower 32 bits
/// are this ("WFNT"; a plain message's are 0), its first 4 bytes the value.
inline constexpr std::uint32_t note_marker = 0x57464e54;
inline std::uint32_t note_value_of(const std::byte* body) noexcept
{
    return static_cast<std::uint32_t>(wire::get_le(body, 4));
}

inline constexpr std::size_t hello_size = 8;
inline constexpr std::array<std::byte, hello_size> hello = {
    std::byte{'w'}, std::byte{'e'}, std::byte{'f'}, std::byte{'t'},
    std::byte{'h'}, std::byte{'i'}, std::byte{1},   std::byte{0}};

inline std::uint8_t type_of(const std::byte* h) noexcept
{
    return std::to_integer<std::uint8_t>(h[1]);
}
inline std::uint32_t value_of(const std::byte* h) noexcept
{
    return static_cast<std::uint32_t>(wire::get_le(h + 4, 4));
}
inline void write_header(std::byte* h, std::uint8_t type, std::uint32_t value) noexcept
{
    wire::Placer(std::span(h, header_size)).u8(version).u8(type).u16(0).u32(value);
}

} // namespace weft::frame
