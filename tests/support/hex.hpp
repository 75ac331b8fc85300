// SPDX-License-Identifier: MIT
// Bytes as lowercase hex on a command line or an output line, and back: how a
// test and the programs it starts hand each other addresses and regions.
#pragma once

#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace weft::test {

inline std::string hex(std::span<const std::byte> b)
{
    std::string s;
    for (std::byte x : b) {
        char two[3];
        std::snprintf(two, sizeof two, "%02x", std::to_integer<unsigned>(x));
        s += two;
    }
    return s;
}

inline std::vector<std::byte> unhex(const std::string& s)
{
    std::vector<std::byte> out;
    for (std::size_t i = 0; i + 1 < s.size(); i += 2)
        out.push_back(static_cast<std::byte>(std::stoul(s.substr(i, 2), nullptr, 16)));
    return out;
}

} // namespace weft::test
