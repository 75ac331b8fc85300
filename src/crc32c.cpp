// SPDX-License-Identifier: MIT
#include "weft/crc32c.hpp"

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
[[gnu::target("sse4.2")]] std::uint32_t update_instruction(std::uint32_t c, const std::byte* p,
                                                           std::size_t n) noexcept
{
    std::uint64_t wide = c;
    for (; n >= 8; p += 8, n -= 8) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        wide = _mm_crc32_u64(wide, v);
    }
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
