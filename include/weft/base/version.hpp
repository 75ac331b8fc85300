// SPDX-License-Identifier: MIT
/// @brief weft's version, as the library was built (weft::version, "0.1.0"):
/// `weft --version` prints it.
#pragma once

namespace weft {
inline constexpr const char* version = "0.1.0";
} // namespace weft
