// SPDX-License-Identifier: MIT
/// @file
/// @brief The three exception types weft throws, and the checked-call helper.
///
/// Every message names the libfabric call, the negative errno, libfabric's own
/// text, the provider, and what to do about it. Destructors never throw; they log.
#pragma once

#include <string>
#include <string_view>
#include <stdexcept>

namespace weft {

/// A libfabric call, a completion, or a system call failed.
class Error : public std::runtime_error {
public:
    Error(std::string call, int code, std::string provider, const std::string& message,
          void* context = nullptr, bool peer_lost = false);

    /// The failing call, e.g. "fi_mr_regattr" or "fi_cq_read" for a failed completion.
    const std::string& call() const noexcept { return call_; }
    /// Negative errno (libfabric's FI_E* values); 0 when no code applies.
    int code() const noexcept { return code_; }
    /// Provider in use ("tcp", "tcp;ofi_rxm", ...), empty when none was chosen yet.
    const std::string& provider() const noexcept { return provider_; }
    /// For a failed operation: the context it was posted with.
    void* context() const noexcept { return context_; }
    /// True when the failure is the peer's departure: it exited, was killed,
    /// or closed its connection (Connection's calls tell this from a refused
    /// access, which leaves the peer there). Nothing sent to it after the
    /// failure arrives; its memory is out of reach.
    bool peer_lost() const noexcept { return peer_lost_; }

private:
    std::string call_;
    int code_;
    std::string provider_;
    void* context_;
    bool peer_lost_;
};

/// A deadline passed. code() is -FI_ETIMEDOUT.
class TimeoutError : public Error {
public:
    using Error::Error;
};

/// The caller asked for something that cannot work (out of bounds, read-only
/// region written, garbage descriptor, unsupported operation); thrown before
/// any traffic is posted. code() is -FI_EINVAL or -FI_EOPNOTSUPP.
class UsageError : public Error {
public:
    using Error::Error;
};

} // namespace weft
