// SPDX-License-Identifier: MIT
// The lane's one way to turn a failed system call into weft::Error.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft::lane {

/// Throws weft::Error for the call that just failed (errno), saying what it did.
[[noreturn]] inline void fail_errno(std::string_view call, const std::string& what,
                                    bool peer_lost = false)
{
    const int e = errno;
    throw Error(std::string(call), -e, "", fmt::format("{}: {}", what, std::strerror(e)), nullptr,
                peer_lost);
}

} // namespace weft::lane
