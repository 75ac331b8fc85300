// SPDX-License-Identifier: MIT
// The integer a store's add() keeps under a key: decimal text, so that get()
// reads it back as text. Every store, and the TCP store's server, use these.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::detail {

/// The count in `value` (0 when empty); nullopt when it is not a decimal integer.
inline std::optional<std::int64_t> parse_count(std::span<const std::byte> value)
{
    std::int64_t n = 0;
    if (value.empty())
        return n;
    const auto* text = reinterpret_cast<const char*>(value.data());
    const auto [end, ec] = std::from_chars(text, text + value.size(), n);
    if (ec != std::errc{} || end != text + value.size())
        return std::nullopt;
    return n;
}

inline std::vector<std::byte> count_text(std::int64_t n)
{
    const std::string text = std::to_string(n);
    const auto bytes = std::as_bytes(std::span(text.data(), text.size()));
    return {bytes.begin(), bytes.end()};
}

} // namespace weft::detail
