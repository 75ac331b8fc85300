// SPDX-License-Identifier: MIT
/// @brief Runtime provider choice that can always explain itself.
///
/// Order: shm when the caller says both peers share a host; verbs when an RDMA
/// device has an ACTIVE port; tcp; sockets as a last resort. Overrides:
/// Options::provider, then the WEFT_PROVIDER environment variable. FI_PROVIDER
/// is respected (libfabric itself hides what it excludes; weft says so).
/// Never a silent fallback: Selection::report() says what was chosen and why.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/bootstrap.hpp"
#include "weft/info.hpp"

namespace weft {

enum class Fallback : std::uint8_t {
    allow,        ///< fall back to a non-RDMA provider, and say so (default)
    require_rdma, ///< fail with the reason when no RDMA provider is usable
};

/// Who drives progress for providers whose data progress is MANUAL
/// (tcp;ofi_rxm, shm, ofi_rxd), so that a passive RMA target never stalls.
enum class Progress : std::uint8_t {
    /// Polling when the provider progresses by itself; a weft progress thread
    /// when its data progress is MANUAL (reported in Selection::report()).
    automatic,
    /// The application polls (Endpoint::poll / wait / progress) on every endpoint,
    /// also on a passive target. Lowest latency, no extra thread.
    polling,
    /// Always run a weft progress thread per endpoint (FI_THREAD_SAFE domain).
    thread,
};

/// How a wait for a completion waits.
enum class Waiting : std::uint8_t {
    /// Spin on the queue (the default): the lowest latency, a core busy while waiting.
    spin,
    /// Sleep on the queue's wait object until something arrives: no CPU while
    /// idle (a wake-up costs ~20 us here), and a descriptor for an event
    /// loop (Node::fd). A progress thread then sleeps too while nothing happens.
    sleep,
};

struct Options {
    /// Provider by name: "verbs", "tcp", "tcp;ofi_rxm", "sockets", "shm", "net", ...
    /// Empty: the WEFT_PROVIDER environment variable, else automatic.
    std::string provider;
    /// Endpoint kind; empty = the chosen provider's fast path (MSG for verbs/tcp).
    std::optional<EndpointKind> kind;
    Fallback fallback = Fallback::allow;
    /// The caller knows both peers run on this host: shared memory may be chosen.
    bool allow_shm = false;
    /// Local address to bind (IP providers), e.g. "127.0.0.1"; empty = provider's choice.
    std::string node;
    /// Domain to pin, e.g. "lo", "eth0", "rxe0"; empty = first suitable.
    std::string domain;
    /// mr_mode bits to turn on even when the provider does not require them
    /// (FI_MR_VIRT_ADDR, FI_MR_PROV_KEY, FI_MR_LOCAL): exercises both addressing
    /// paths on providers that accept them.
    std::uint64_t force_mr_mode = 0;
    Progress progress = Progress::automatic;
    /// How often a weft progress thread checks an endpoint; it drives progress
    /// only when the application has not polled since the last check.
    std::chrono::microseconds progress_interval{100};
    /// How waits wait (Waiting::sleep: no CPU while idle).
    Waiting waiting = Waiting::spin;
    /// Pin progress threads to this CPU (e.g. one near the device); none = unpinned.
    std::optional<int> progress_cpu;
    /// Transmit / receive queue depth (0 = provider default, capped to device limits).
    std::size_t tx_depth = 0;
    std::size_t rx_depth = 0;
    /// Receive slots per endpoint for messages and notifications, and their size.
    /// A message larger than slot_size is rejected before it is sent.
    std::size_t rx_slots = 16;
    std::size_t slot_size = 8192;
    /// A secret both peers must hold before the bootstrap reveals any address or
    /// key (HMAC-SHA256 challenge-response, see bootstrap.hpp); at least 16 bytes.
    /// Empty: the WEFT_SECRET environment variable, else no secret.
    std::string secret;
    /// Connecting: how a refused or unreachable server is retried, and whether
    /// Connection::reconnect() may be used after it went away.
    RetryPolicy retry;
    /// Server: how long one client may take from its TCP connect to a connected
    /// endpoint (its own libfabric start-up included) before it is dropped.
    std::chrono::milliseconds handshake_timeout{20000};
};

struct Rejection {
    std::string provider;
    std::string reason;
};

/// The outcome of provider selection.
class Selection {
public:
    Selection(Info info, std::string reason, std::vector<Rejection> rejected, bool fell_back,
              bool progress_thread, Options options);

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
};

/// Chooses a provider. Throws weft::Error naming every rejected provider and why
/// when nothing fits (instead of libfabric's bare -FI_ENODATA).
Selection select(const Options& options = {});

/// Chooses exactly `provider` (a full name such as "tcp;ofi_rxm") for talking to a
/// peer at `dest` (raw address bytes in `addr_format`), as a client does after the
/// server announced its choice. No fallback: the peer has already chosen.
Selection select_for_peer(const Options& options, std::string_view provider, EndpointKind kind,
                          std::uint32_t addr_format, const void* dest, std::size_t dest_len);

/// True when endpoints opened with these options run a weft progress thread:
/// Progress::thread, or Progress::automatic where a passive target would
/// otherwise stall (Quirks::target_needs_progress).
bool wants_progress_thread(const Options& options, const Quirks& quirks) noexcept;

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

} // namespace weft
