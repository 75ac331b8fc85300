// SPDX-License-Identifier: MIT
#pragma once

#include "harness.hpp"

namespace weft::bench {
/// The ends of weft-raw-bench: the patterns written directly against
/// libfabric's C API, as a careful user would without weft.
Factory raw_factory();
} // namespace weft::bench
