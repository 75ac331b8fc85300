// SPDX-License-Identifier: MIT
#pragma once

namespace weft {
inline constexpr const char* version = "0.1.0";
} // namespace weft
