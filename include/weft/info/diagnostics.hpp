// SPDX-License-Identifier: MIT
/// @brief What weft can tell about this machine's fabrics: every provider's
/// verdict (what `weft info` prints), why libfabric offers nothing for a
/// request, and the checks each provider supplies (what `weft doctor` prints).
///
/// Everything here reads the machine as it is now; nothing is cached. Any
/// thread may call these functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "weft/info/info.hpp"
#include "weft/info/options.hpp"

namespace weft {

/// One provider weft knows, as it stands on this machine for these options.
struct Candidate {
    std::string provider; ///< fi_getinfo name, e.g. "tcp;ofi_rxm"
    EndpointKind kind;
    int rank;             ///< automatic order (lower first); 0 = only when asked for by name
    bool rdma;
    bool usable;
    std::string detail;   ///< why not usable, or what its probe found
    std::string summary;  ///< what the provider is
};

/// Every (provider, endpoint kind) weft knows, in selection order, each with its
/// verdict: what `weft info` and `weft doctor` show.
std::vector<Candidate> survey(const Options& options = {});

/// Why `provider` (a getinfo name) gives nothing for these options: the first
/// attribute, tried one at a time, that excludes it.
std::string explain_enodata(const Options& options, std::string_view provider, EndpointKind kind);

/// How a finding bears on running weft here.
enum class Verdict { ok, note, warn, fail };
std::string_view to_string(Verdict v) noexcept;

/// One check's result: what it found, and the exact fix when it is not ok.
struct Finding {
    std::string check; ///< a short stable name ("memlock", "ptrace/shm", "rdma devices")
    Verdict verdict;
    std::string detail;
    std::string fix;
};

struct CheckOptions {
    /// shm: probe cross-memory attach into this running process (its PID)
    /// instead of between two sibling processes; 0 = the siblings.
    int shm_peer = 0;
};

/// The checks the providers supply, in selection order: shm's cross-process
/// copies and /dev/shm; verbs's devices and ports, RoCE GIDs, rdma_cm, the
/// iWARP port mapper and the locked-memory limit. The shm probe forks two
/// short-lived children.
std::vector<Finding> provider_checks(const CheckOptions& options = {});

} // namespace weft
