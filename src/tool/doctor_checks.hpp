// SPDX-License-Identifier: MIT
// `weft doctor`'s checks of a group's needs (doctor_group.cpp); the providers
// supply their own (weft::provider_checks).
#pragma once

#include "weft/info/diagnostics.hpp"

namespace weft::tool::doctor_checks {

/// For a group of `ranks` (doctor_group.cpp): RLIMIT_NOFILE against one
/// descriptor per peer, and FI_UNIVERSE_SIZE against ofi_rxm's sizing.
Finding check_open_files(unsigned ranks);
Finding check_universe(unsigned ranks);

} // namespace weft::tool::doctor_checks
