// SPDX-License-Identifier: MIT
/// @brief Runtime provider choice that can always explain itself.
///
/// Order: shm when the caller says both peers share a host; verbs when an RDMA
/// device has an ACTIVE port; tcp; sockets as a last resort. Overrides:
/// Options::provider, then the WEFT_PROVIDER environment variable. FI_PROVIDER
/// is respected (libfabric itself hides what it excludes; weft says so).
/// Never a silent fallback: Selection::report() says what was chosen and why.
/// What every provider looks like on this machine: weft/info/diagnostics.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/info/info.hpp"
#include "weft/info/options.hpp"

namespace weft {

struct Rejection {
    std::string provider;
    std::string reason;
};

/// The outcome of provider selection.
class Selection {
public:
    /// `same_host_from`: what decided options.same_host where the application
    /// left it automatic ("WEFT_SAME_HOST=lane", "automatic: no provider was
    /// named"), or empty when Options did.
    Selection(Info info, std::string reason, std::vector<Rejection> rejected, bool fell_back,
              bool progress_thread, Options options, std::string same_host_from = {});

    const Info& info() const noexcept { return info_; }
    const Options& options() const noexcept { return options_; }
    /// Full provider name, e.g. "tcp" or "tcp;ofi_rxm".
    std::string_view provider() const noexcept { return info_.provider(); }
    EndpointKind kind() const noexcept { return info_.kind(); }
    const std::string& reason() const noexcept { return reason_; }
    const std::vector<Rejection>& rejected() const noexcept { return rejected_; }
    /// True when an RDMA provider was wanted but a non-RDMA one was taken.
    bool fell_back() const noexcept { return fell_back_; }
    /// True when endpoints opened from this selection run a weft progress thread.
    bool progress_thread() const noexcept { return progress_thread_; }
    bool rdma() const noexcept;

    /// Multi-line report: provider, fabric, domain, endpoint kind, why, what was
    /// rejected, caps, and how progress is driven. Printed on every run.
    std::string report() const;

private:
    Info info_;
    std::string reason_;
    std::vector<Rejection> rejected_;
    bool fell_back_;
    bool progress_thread_;
    Options options_;
    std::string same_host_from_;
};

/// Chooses a provider. Throws weft::Error naming every rejected provider and why
/// when nothing fits (instead of libfabric's bare -FI_ENODATA).
Selection select(const Options& options = {});

/// Chooses exactly `provider` (a full name such as "tcp;ofi_rxm") for talking to a
/// peer at `dest` (raw address bytes in `addr_format`), as a client does after the
/// server announced its choice. No fallback: the peer has already chosen.
Selection select_for_peer(const Options& options, std::string_view provider, EndpointKind kind,
                          std::uint32_t addr_format, const void* dest, std::size_t dest_len);

} // namespace weft
