// SPDX-License-Identifier: MIT
/// @brief All provider-specific knowledge weft has, as one small record per provider.
///
/// Behaviour follows the bits fi_getinfo reports first (mr_mode, cq_data_size,
/// data_progress, inject size, ...), these records second. Nothing outside
/// providers/ compares provider names: it asks these functions instead.
/// Adding a provider means one file here and one line in registry.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fabric.h>

#include "weft/base/detail/progress_lock.hpp"
#include "weft/info/diagnostics.hpp"
#include "weft/info/info.hpp"

namespace weft::providers {

/// What a provider's own probe found (for example: is an RDMA port active?).
struct Availability {
    bool usable = true;
    std::string detail; ///< why not, or what was found ("rxe0 port 1 ACTIVE")
};

struct Traits {
    std::string_view name;    ///< core provider name as fi_info reports it ("tcp")
    std::string_view summary; ///< one line for reports
    /// Automatic selection order, lowest first; 0 = only when asked for by name.
    int rank = 0;
    bool rdma = false;           ///< satisfies Fallback::require_rdma
    bool same_host_only = false; ///< peers must share a host (shared memory)
    bool ip_addressing = true;   ///< binds to IP addresses: node/service hints apply
    bool pins_memory = false;    ///< registration pins pages: RLIMIT_MEMLOCK applies
    /// fi_getinfo provider names for each endpoint kind ("" = kind unavailable).
    std::string_view msg_path;
    std::string_view rdm_path;
    EndpointKind preferred = EndpointKind::msg; ///< the fast path when the caller has no preference
    /// data_progress says AUTO, but data moves only while someone reads the CQ
    /// (tcp and net in libfabric 1.17 leave a passive target silent: "progress:
    /// without anyone driving it, a passive target stalls").
    bool auto_progress_needs_reads = false;
    /// See weft::Quirks for these (libfabric 1.17; providers/QUIRKS.md).
    bool keys_unchecked = false;
    bool remote_errors_silent = false;
    bool atomics_unreliable = false;
    bool dead_peer_blocks_endpoint = false;
    bool dead_peer_can_hang_calls = false;
    bool reads_overtake_queued_writes = false;
    bool ranges_wait_for_target = false;
    bool wait_fd_stays_readable = false;
    bool rma_target_in_software = true; ///< false: the device does it (verbs)
    /// Takes FI_COMPLETION as a default op flag, so that only the operations
    /// that ask complete (verbs refuses it: -FI_ENODATA).
    bool selective_completion = true;
    /// Optional probe run before fi_getinfo (verbs: is any port ACTIVE?).
    Availability (*probe)() = nullptr;
    /// Optional set-up before libfabric initialises its providers (the first
    /// fi_getinfo in the process); returns what it did, for the report.
    std::string (*prepare)() = nullptr;
    /// Optional line about the device behind a chosen fi_info, for the report
    /// (verbs: InfiniBand / RoCE v1 / RoCE v2 / iWARP, GID type and index).
    std::string (*describe)(const fi_info* info) = nullptr;
    /// NUMA node of the device behind a domain (-1 unknown); nullptr: the
    /// domain is a network interface (IP providers) or has no device (shm).
    int (*numa_node)(const fi_info* info) = nullptr;
    /// Extra fix text for an error code seen on this provider ("" when none).
    std::string (*error_hint)(int code) = nullptr;
    /// Optional refinement of the quirks for one chosen fi_info (verbs: what
    /// the device behind it is: iWARP, RoCE, rxe).
    void (*refine_quirks)(const fi_info* info, Quirks& q) = nullptr;
    /// Optional step between fi_endpoint and fi_enable (shm: name the
    /// endpoint's region so that no dead process can have left it behind);
    /// returns 0 or a negative libfabric error code.
    int (*before_enable)(fid_ep* ep) = nullptr;
    /// Optional: the spin lock the provider's progress on this enabled
    /// endpoint takes, mapped where weft can read it, or nullptr (shm in
    /// libfabric 1.17: its region's lock; CompletionQueue::guard).
    std::shared_ptr<const detail::ProgressLock> (*progress_lock)(fid_ep* ep) = nullptr;
    /// Optional step before fi_endpoint, on the endpoint's own copy of the
    /// fi_info (verbs: an ofi_rxm endpoint over iWARP gets a listening port
    /// that TCP does not hold); returns 0 or a negative libfabric error code.
    /// Called for layered endpoints too ("verbs;ofi_rxm").
    int (*before_endpoint)(fi_info* info) = nullptr;
    /// Optional checks of this machine for `weft doctor` (weft::provider_checks):
    /// appends its findings (shm: ptrace and /dev/shm; verbs: devices, rdma_cm).
    void (*checks)(const CheckOptions& options, std::vector<Finding>& out) = nullptr;
};


/// The hint of the providers over kernel TCP sockets (tcp, net): what a
/// dropped connection did to the operations on it.
std::string tcp_family_hint(int code);
/// Their quirks beyond the record: on RDM endpoints a refusal can be lost
/// (Quirks::refusal_lost_on_reconnect).
void tcp_family_quirks(const fi_info* info, Quirks& q);

/// The NUMA node a sysfs `numa_node` file names, or -1.
int read_numa_node(const std::string& sysfs_path);

/// All known providers, in automatic selection order (rank > 0 first, by rank).
std::span<const Traits* const> all();

/// Traits for a provider name as fi_info reports it ("tcp;ofi_rxm" -> tcp's record).
/// Unknown providers get a generic record with rank 0.
const Traits& traits_for(std::string_view fi_prov_name);

/// A user's provider request ("tcp", "tcp;ofi_rxm", "shm", "verbs;ofi_rxm", ...).
struct Request {
    const Traits* traits;
    std::string path;  ///< fi_getinfo provider name to ask for
    bool kind_implied; ///< the name fixes the endpoint kind ("tcp;ofi_rxm" is RDM)
    EndpointKind kind;
};
/// Parses a request; the kind comes from the name when layered, else from `kind`
/// or the provider's fast path.
Request parse_request(std::string_view name, const EndpointKind* kind);

/// True for a utility layer over a core provider ("tcp;ofi_rxm"): RMA is
/// checked by the core, which keeps its own mr_mode.
bool is_layered(std::string_view fi_prov_name) noexcept;
/// Whether endpoints of `fi_prov_name` complete selectively: the core's
/// record says so, and no utility layer is over it (ofi_rxm over verbs never
/// returns the transmit credit of an unsignaled write on siw).
bool selective_completion(std::string_view fi_prov_name) noexcept;

/// The fi_getinfo provider name for a kind ("" if the provider has no such endpoint).
std::string_view path_for(const Traits& t, EndpointKind kind);

weft::Quirks quirks_for(const fi_info* info);

/// Extra fix text for an error on this provider, or "".
std::string error_hint(std::string_view fi_prov_name, int code);

/// The provider's step between fi_endpoint and fi_enable, if it has one
/// (core providers only); 0 or a negative libfabric error code.
int before_enable(std::string_view fi_prov_name, fid_ep* ep);

/// The lock the provider's progress on `ep` takes, where weft can watch it
/// (core providers only), or nullptr.
std::shared_ptr<const detail::ProgressLock> progress_lock(std::string_view fi_prov_name, fid_ep* ep);

/// The provider's step before fi_endpoint on the endpoint's own fi_info, if
/// it has one; 0 or a negative libfabric error code.
int before_endpoint(std::string_view fi_prov_name, fi_info* info);

/// NUMA node of the device behind `info`'s domain, or -1 when unknown.
int numa_node(const fi_info* info);

/// The device line for a report, or "".
std::string describe(const fi_info* info);

/// Runs every provider's prepare() once per process; returns what was done.
const std::string& prepare_all();

/// The selection order as text: "verbs > tcp > sockets (shm: same host, on request)".
std::string order_text();

// The records, one per file in providers/.
extern const Traits verbs;
extern const Traits tcp;
extern const Traits net;
extern const Traits sockets;
extern const Traits shm;
extern const Traits udp;

} // namespace weft::providers
