// SPDX-License-Identifier: MIT
/// @brief CRC-32C (Castagnoli): weft's wire formats check their bytes with it,
/// and applications their data (the KV node's slots). The CPU's crc32
/// instruction where it has one (SSE 4.2), a table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace weft {

/// CRC-32C of `bytes`.
std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept;
/// CRC-32C of the bytes `crc` was computed over followed by `more`:
/// crc32c_extend(crc32c(a), b) == crc32c(a + b), for checksums of pieces.
std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> more) noexcept;

} // namespace weft
