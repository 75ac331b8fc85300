// SPDX-License-Identifier: MIT
// Skipping a test that cannot run here, visibly: the reason is a warning in
// the test's output (a skip that said nothing would read as a pass).
#pragma once

#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "support/process.hpp"

namespace weft::test {

/// `why` when the shell command line `probe` fails (a program that is not
/// installed, a namespace this process may not make), else nothing.
inline std::optional<std::string> unless(const std::string& probe, std::string why)
{
    if (succeeds(probe))
        return std::nullopt;
    return why;
}

} // namespace weft::test

/// Skips the current test, saying why, when `why` (an optional reason) holds one.
#define WEFT_SKIP_IF(why)                                                                    \
    do {                                                                                     \
        if (const auto why_ = (why)) {                                                       \
            WARN("SKIPPED: " << *why_);                                                      \
            return;                                                                          \
        }                                                                                    \
    } while (0)
