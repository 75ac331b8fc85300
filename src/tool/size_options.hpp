// SPDX-License-Identifier: MIT
/// @brief Command-line options (CLI11) that take sizes and counts in the one
/// syntax of sizes.hpp: only the files that declare options include CLI11,
/// whose implementation every file that includes it compiles anew.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "sizes.hpp"

namespace weft::tool {

namespace detail {

/// "-s,--sizes" -> "--sizes": the name error messages use.
inline std::string long_name(const std::string& names)
{
    const auto comma = names.rfind(',');
    return comma == std::string::npos ? names : names.substr(comma + 1);
}

inline CLI::ValidationError size_error(const std::string& option, const std::invalid_argument& e)
{
    return CLI::ValidationError(option, std::string(e.what()) + "; " + std::string(size_syntax));
}

inline std::size_t checked_size(const std::string& option, const std::string& text,
                                std::size_t least)
{
    std::size_t v = 0;
    try {
        v = parse_size(text);
    } catch (const std::invalid_argument& e) {
        throw size_error(option, e);
    }
    if (v < least)
        throw CLI::ValidationError(option, "'" + text + "' is less than " + std::to_string(least) +
                                               " B");
    return v;
}

} // namespace detail

/// Adds an option taking one size (at least `least` bytes) into `target`.
inline CLI::Option* add_size_option(CLI::App& app, const std::string& names, std::size_t& target,
                                    const std::string& description, std::size_t least = 1)
{
    const std::string option = detail::long_name(names);
    return app
        .add_option_function<std::string>(
            names, [&target, option, least](const std::string& v) {
                target = detail::checked_size(option, v, least);
            },
            description)
        ->type_name("SIZE");
}

/// Adds an option taking a comma-separated list of sizes (each at least `least`).
inline CLI::Option* add_size_list_option(CLI::App& app, const std::string& names,
                                         std::vector<std::size_t>& target,
                                         const std::string& description, std::size_t least = 1)
{
    const std::string option = detail::long_name(names);
    return app
        .add_option_function<std::string>(
            names,
            [&target, option, least](const std::string& v) {
                std::vector<std::size_t> sizes;
                try {
                    sizes = parse_size_list(v);
                } catch (const std::invalid_argument& e) {
                    throw detail::size_error(option, e);
                }
                for (const std::size_t s : sizes)
                    if (s < least)
                        throw CLI::ValidationError(option, "'" + v + "': " + std::to_string(s) +
                                                               " B is less than " +
                                                               std::to_string(least) + " B");
                target = std::move(sizes);
            },
            description)
        ->type_name("SIZE,...");
}

/// Adds an option taking a count (a whole number, at least 1) into `target`.
template <class T>
CLI::Option* add_count_option(CLI::App& app, const std::string& names, T& target,
                              const std::string& description)
{
    const std::string option = detail::long_name(names);
    return app
        .add_option_function<std::string>(
            names,
            [&target, option](const std::string& v) {
                const std::string_view t = detail::trim(v);
                std::uint64_t n = 0;
                bool ok = !t.empty() && t.size() <= 19;
                for (const char c : t) {
                    ok = ok && detail::is_digit(c);
                    n = n * 10 + static_cast<std::uint64_t>(c - '0');
                }
                if (!ok || n == 0 || n > std::numeric_limits<T>::max())
                    throw CLI::ValidationError(option, "'" + v + "' is not a count; give a whole "
                                                                 "number of at least 1, e.g. 1000");
                target = static_cast<T>(n);
            },
            description)
        ->type_name("N");
}

} // namespace weft::tool
