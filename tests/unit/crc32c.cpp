// SPDX-License-Identifier: MIT
// CRC-32C: the check value, and the table and the CPU's instruction against its
// bitwise definition at every length and alignment, without any fabric.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "weft/base/crc32c.hpp"

using namespace weft;

TEST_CASE("crc32c: the check value, and any split of a buffer extends to the whole's, at "
          "every length and alignment, long buffers too",
          "[unit][wire]")
{
    // The definition, one bit at a time: what the table and the CPU's crc32
    // instruction must both agree with.
    const auto by_bits = [](std::span<const std::byte> b) {
        std::uint32_t c = ~0u;
        for (const std::byte x : b) {
            c ^= std::to_integer<std::uint32_t>(x);
            for (int k = 0; k < 8; ++k)
                c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        return ~c;
    };
    std::vector<std::byte> data(600);
    for (std::size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<std::byte>(i * 131 + (i >> 3));
    for (std::size_t at = 0; at < 9; ++at)
        for (std::size_t len = 0; len + at <= 300; ++len) {
            const auto b = std::span(data).subspan(at, len);
            INFO("bytes " << at << ".." << at + len);
            REQUIRE(crc32c(b) == by_bits(b));
            const std::size_t cut = len / 3;
            REQUIRE(crc32c_extend(crc32c(b.first(cut)), b.subspan(cut)) == crc32c(b));
        }
    CHECK(crc32c(std::span(data)) == by_bits(std::span(data)));
    // Long buffers go three runs of 256 bytes at a time, joined: lengths around each multiple
    // of 768, up to 3 of them and a bit.
    std::vector<std::byte> large(2600);
    for (std::size_t i = 0; i < large.size(); ++i)
        large[i] = static_cast<std::byte>(i * 37 + (i >> 5) + 11);
    for (std::size_t len = 700; len + 9 <= large.size(); len += len % 768 < 80 || len % 768 > 700 ? 1 : 61)
        for (std::size_t at : {0, 3, 8}) {
            const auto b = std::span(large).subspan(at, len);
            INFO("bytes " << at << ".." << at + len);
            REQUIRE(crc32c(b) == by_bits(b));
            REQUIRE(crc32c_extend(crc32c(b.first(len / 2)), b.subspan(len / 2)) == crc32c(b));
        }
}
