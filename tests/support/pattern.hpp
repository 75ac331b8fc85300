// SPDX-License-Identifier: MIT
// Test data: one deterministic generator (the tests and the programs they
// start write and check the same bytes from a seed; a soak's offsets and
// lengths come from it too), and a check that memory holds one value
// throughout. What must not be guessed (ports, keys) comes from weft's one
// source of random bytes, detail::random_bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace weft::test {

/// A deterministic stream of numbers from a seed (xorshift64): fast, and the
/// same on every machine.
class Xorshift {
public:
    explicit Xorshift(std::uint64_t seed) noexcept : x_(seed * 0x9E3779B97F4A7C15ull + 1) {}
    std::uint64_t operator()() noexcept
    {
        x_ ^= x_ << 13;
        x_ ^= x_ >> 7;
        x_ ^= x_ << 17;
        return x_;
    }
    /// Fills `out` with the stream's next bytes.
    void fill(std::span<std::byte> out) noexcept
    {
        for (auto& b : out)
            b = static_cast<std::byte>((*this)() >> 24);
    }

private:
    std::uint64_t x_;
};

/// Deterministic bytes from `seed`.
inline void fill_pattern(std::span<std::byte> out, std::uint64_t seed)
{
    Xorshift(seed).fill(out);
}

/// Whether the `n` bytes at `p` are all `v`.
inline bool all_equal(const std::byte* p, std::size_t n, std::byte v)
{
    return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

} // namespace weft::test
