// SPDX-License-Identifier: MIT
// The error layer's own tools (not part of weft's API): the checked call every
// libfabric status goes through, and the message it builds.
#pragma once

#include <string>
#include <string_view>

#include "weft/base/error.hpp"

namespace weft::detail {

/// What a provider adds to a failure's message for a code (its record's hint).
/// The provider registry installs it: the error layer names no provider.
using HintSource = std::string (*)(std::string_view provider, int code);
void set_hint_source(HintSource source) noexcept;

/// Builds "<call> failed on <provider>: <fi_strerror> (<code>). <hint>", the
/// provider's own hint for the code appended.
std::string format_failure(std::string_view call, int code, std::string_view provider,
                           std::string_view hint);

[[noreturn]] void throw_error(std::string_view call, int code, std::string_view provider,
                              std::string_view hint = {});

/// One checked-call helper for every libfabric call that returns a status.
inline void check(long ret, std::string_view call, std::string_view provider,
                  std::string_view hint = {})
{
    if (ret < 0) [[unlikely]]
        throw_error(call, static_cast<int>(ret), provider, hint);
}

/// Logs to stderr; for destructors and other places that must not throw.
void log_warning(std::string_view message) noexcept;

} // namespace weft::detail
