// SPDX-License-Identifier: MIT
/// @brief The checks of Endpoint::read_ranges, shared with the Node's
/// same-host lane: one set of rules and words on every path.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "weft/fabric/endpoint.hpp"

namespace weft::detail {

/// Checks every range of a read_ranges() before any is read: 1 to `limit`
/// ranges, none empty, each within `src`'s readable bytes. Returns the bytes
/// in all; UsageError naming the range otherwise.
std::size_t check_ranges(std::span<const Endpoint::Read> reads, const RemoteRegion& src,
                         std::size_t limit, std::string_view provider);

} // namespace weft::detail
