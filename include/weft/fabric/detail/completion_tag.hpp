// SPDX-License-Identifier: MIT
/// @brief The context weft posts its own operations with (not part of weft's
/// API).
#pragma once

#include <cstdint>

namespace weft {

class Endpoint;

namespace detail {

/// The context of an operation weft posted itself.
struct Tag {
    enum class Kind : std::uint8_t { free, slot, internal, fence, side };
    Endpoint* owner = nullptr; ///< nullptr once the endpoint has gone (and for Kind::side)
    std::uint32_t index = 0;   ///< slot: which receive slot of the owner; side: its buffer
    Kind kind = Kind::free;
};

} // namespace detail
} // namespace weft
