// SPDX-License-Identifier: MIT
#pragma once

#include "harness.hpp"

namespace weft::bench {
/// The ends of `weft bench`: weft's own API.
Factory weft_factory();
/// The Options both ends open with (weft_ends.cpp).
Options options_for(const Config& cfg);
/// The local micro-benchmarks: no peer, only a domain (weft_local.cpp).
int run_weft_local(const Config& cfg);
} // namespace weft::bench
