// SPDX-License-Identifier: MIT
// The checks providers supply to weft::provider_checks (`weft doctor`): each
// provider's record points at its own (Traits::checks).
#pragma once

#include <string>
#include <vector>

#include "weft/info/diagnostics.hpp"

namespace weft::providers {

void shm_checks(const CheckOptions& options, std::vector<Finding>& out);
void verbs_checks(const CheckOptions& options, std::vector<Finding>& out);

/// The first line of a file ("" when it cannot be read): /proc and /sys.
std::string read_first_line(const char* path);

} // namespace weft::providers
