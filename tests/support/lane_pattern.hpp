// SPDX-License-Identifier: MIT
// The bytes a lane test's target holds (tests/lane/readers.cpp) and its
// reader processes check (weft-test-lane-peer check): byte i of the region.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::test {

inline std::byte lane_pattern(std::uint64_t i)
{
    return static_cast<std::byte>((i * 131 + 7 + (i >> 8)) & 0xff);
}

} // namespace weft::test
