// SPDX-License-Identifier: MIT
/// @brief The one syntax for sizes and counts that every option of weft's tools
/// takes (`weft bench -s`, `weft pingpong --min-size / --max-size`, `-n`).
///
/// A size is whole bytes, with an optional unit in any case, powers of 1024:
/// k / kb / kib, m / mb / mib, g / gb / gib (and b for bytes): 4096, 64k, 64KiB,
/// 1.5m. A fraction is accepted only when it comes to whole bytes (1.5k = 1536;
/// 0.1k and 1.5 are refused). Header-only: the pingpong library and the
/// benchmarks share it without sharing a library; the command-line options
/// that take them are in size_options.hpp. Tested by the "tools: sizes: ..."
/// test cases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace weft::tool {

/// What a size may look like; error messages end with it.
inline constexpr std::string_view size_syntax =
    "a size is whole bytes with an optional unit k, m or g (also kb/kib, mb/mib, gb/gib; any "
    "case; powers of 1024), e.g. 4096, 64k, 1.5m, 2GiB";

namespace detail {

inline std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// The multiplier a unit names, or 0 when it names none.
inline std::uint64_t unit_multiplier(std::string_view unit)
{
    std::string u(unit);
    for (char& c : u)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    if (u.empty() || u == "b")
        return 1;
    if (u == "k" || u == "kb" || u == "kib")
        return std::uint64_t{1} << 10;
    if (u == "m" || u == "mb" || u == "mib")
        return std::uint64_t{1} << 20;
    if (u == "g" || u == "gb" || u == "gib")
        return std::uint64_t{1} << 30;
    return 0;
}

} // namespace detail

/// Parses one size into bytes. Throws std::invalid_argument saying what is
/// wrong with `text` (quoting it); the caller adds the option's name.
inline std::size_t parse_size(std::string_view text)
{
    const std::string_view t = detail::trim(text);
    const auto bad = [&](std::string_view why) {
        return std::invalid_argument("'" + std::string(text) + "' " + std::string(why));
    };
    if (t.empty())
        throw bad("is empty");
    std::size_t i = 0;
    std::uint64_t whole = 0;
    bool too_large = false;
    for (; i < t.size() && detail::is_digit(t[i]); ++i) {
        const auto digit = static_cast<std::uint64_t>(t[i] - '0');
        if (whole > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
            too_large = true;
        else
            whole = whole * 10 + digit;
    }
    if (i == 0)
        throw bad("is not a size");
    std::string fraction; // the digits after the point
    if (i < t.size() && t[i] == '.') {
        for (++i; i < t.size() && detail::is_digit(t[i]); ++i)
            fraction += t[i];
        if (fraction.empty())
            throw bad("is not a size (a point needs digits after it)");
    }
    const std::string_view unit = detail::trim(t.substr(i));
    const std::uint64_t mult = detail::unit_multiplier(unit);
    if (mult == 0)
        throw bad("has an unknown unit '" + std::string(unit) + "'");
    // fraction × mult, exactly, one decimal digit at a time from the right: the
    // carry out of the top digit is the whole bytes, and every digit left
    // behind must be 0.
    std::uint64_t carry = 0;
    for (std::size_t k = fraction.size(); k-- > 0;) {
        const std::uint64_t v = static_cast<std::uint64_t>(fraction[k] - '0') * mult + carry;
        fraction[k] = static_cast<char>('0' + v % 10);
        carry = v / 10;
    }
    if (fraction.find_first_not_of('0') != std::string::npos)
        throw bad("is not a whole number of bytes");
    constexpr std::uint64_t most = std::numeric_limits<std::size_t>::max();
    if (too_large || whole > (most - carry) / mult)
        throw bad("is too large");
    return static_cast<std::size_t>(whole * mult + carry);
}

/// Parses a comma-separated list of sizes ("8,4k,64k"). Throws
/// std::invalid_argument naming the item that is not a size, and the list.
inline std::vector<std::size_t> parse_size_list(std::string_view text)
{
    std::vector<std::size_t> out;
    const bool list = text.find(',') != std::string_view::npos;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t comma = text.find(',', pos);
        const std::string_view item =
            text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
        if (detail::trim(item).empty())
            throw std::invalid_argument("'" + std::string(text) + "' has an empty item");
        try {
            out.push_back(parse_size(item));
        } catch (const std::invalid_argument& e) {
            if (!list)
                throw;
            throw std::invalid_argument(std::string(e.what()) + " (in '" + std::string(text) + "')");
        }
        if (comma == std::string_view::npos)
            return out;
        pos = comma + 1;
    }
}

/// A size or count for a results column, in the units parse_size reads:
/// "512", "4k", "1.5m", "2g".
inline std::string size_text(double v)
{
    if (v >= (1ull << 30))
        return fmt::format("{:.4g}g", v / (1ull << 30));
    if (v >= (1 << 20))
        return fmt::format("{:.4g}m", v / (1 << 20));
    if (v >= 1024)
        return fmt::format("{:.4g}k", v / 1024);
    return fmt::format("{:g}", v);
}

} // namespace weft::tool
