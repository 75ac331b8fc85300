// SPDX-License-Identifier: MIT
#pragma once

#include "harness.hpp"

namespace weft::bench {
/// The ends of `weft bench`: weft's own API.
Factory weft_factory();
} // namespace weft::bench
