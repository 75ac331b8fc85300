// SPDX-License-Identifier: MIT
#include "weft/base/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace weft {
namespace {

constexpr auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        t[i] = c;
    }
    return t;
}();

std::uint32_t update_table(std::uint32_t c, const std::byte* p, std::size_t n) noexcept
{
    for (std::size_t i = 0; i < n; ++i)
        c = table[(c ^ std::to_integer<std::uint8_t>(p[i])) & 0xffu] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
/// The instruction's chain over one buffer waits for each step (3 cycles) before the next;
/// three chains over three runs of `run` bytes side by side go about three times as fast,
/// and are joined by moving a register past `run` zero bytes. Feeding a register zeros is
/// linear in its bits, so the move is four tables of 256 (one per byte of the register),
/// made from the 32 bits' moves the first time a buffer is long enough.
constexpr std::size_t run = 256;

struct Zeros {
    std::array<std::array<std::uint32_t, 256>, 4> byte{};
    Zeros()
    {
        std::array<std::uint32_t, 32> bit{}; // where each bit of a register goes
        for (int k = 0; k < 32; ++k) {
            std::uint32_t c = 1u << k;
            for (std::size_t i = 0; i < run; ++i)
                c = table[c & 0xffu] ^ (c >> 8);
            bit[k] = c;
        }
        for (int j = 0; j < 4; ++j)
            for (std::uint32_t b = 0; b < 256; ++b)
                for (int k = 0; k < 8; ++k)
                    if (b & (1u << k))
                        byte[j][b] ^= bit[8 * j + k];
    }
    std::uint32_t past_run(std::uint32_t c) const noexcept
    {
        return byte[0][c & 0xffu] ^ byte[1][(c >> 8) & 0xffu] ^ byte[2][(c >> 16) & 0xffu] ^ byte[3][c >> 24];
    }
};

[[gnu::target("sse4.2")]] std::uint32_t update_instruction(std::uint32_t c, const std::byte* p,
                                                           std::size_t n) noexcept
{
    const auto load = [](const std::byte* at) {
        std::uint64_t v;
        std::memcpy(&v, at, 8);
        return v;
    };
    std::uint64_t wide = c;
    if (n >= 3 * run) {
        static const Zeros zeros;
        for (; n >= 3 * run; p += 3 * run, n -= 3 * run) {
            std::uint64_t second = 0, third = 0;
            for (std::size_t i = 0; i < run; i += 8) {
                wide = _mm_crc32_u64(wide, load(p + i));
                second = _mm_crc32_u64(second, load(p + run + i));
                third = _mm_crc32_u64(third, load(p + 2 * run + i));
            }
            wide = zeros.past_run(static_cast<std::uint32_t>(wide)) ^ second;
            wide = zeros.past_run(static_cast<std::uint32_t>(wide)) ^ third;
        }
    }
    for (; n >= 8; p += 8, n -= 8)
        wide = _mm_crc32_u64(wide, load(p));
    auto narrow = static_cast<std::uint32_t>(wide);
    for (; n > 0; ++p, --n)
        narrow = _mm_crc32_u8(narrow, std::to_integer<std::uint8_t>(*p));
    return narrow;
}

const bool has_instruction = __builtin_cpu_supports("sse4.2");
#endif

std::uint32_t update(std::uint32_t c, std::span<const std::byte> bytes) noexcept
{
#if defined(__x86_64__)
    if (has_instruction)
        return update_instruction(c, bytes.data(), bytes.size());
#endif
    return update_table(c, bytes.data(), bytes.size());
}

} // namespace

std::uint32_t crc32c(std::span<const std::byte> bytes) noexcept { return ~update(~0u, bytes); }

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> more) noexcept
{
    return ~update(~crc, more);
}

} // namespace weft
