// SPDX-License-Identifier: MIT
// Test data: a deterministic pattern from a seed (the tests and the programs
// they start write and check the same bytes), and a check that memory holds
// one value throughout.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace weft::test {

/// Deterministic bytes from `seed` (xorshift).
inline void fill_pattern(std::span<std::byte> out, std::uint64_t seed)
{
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& b : out) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b = static_cast<std::byte>(x >> 24);
    }
}

/// Whether the `n` bytes at `p` are all `v`.
inline bool all_equal(const std::byte* p, std::size_t n, std::byte v)
{
    return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

} // namespace weft::test
