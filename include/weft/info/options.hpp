// SPDX-License-Identifier: MIT
/// @brief Options by layer: which provider (SelectionOptions), how completions
/// are driven and waited for (ProgressOptions), how an endpoint is sized
/// (EndpointOptions), and how peers meet (BootstrapOptions). Options holds
/// them all; each layer reads its own part, and the object layer (Endpoint,
/// Completions, Node) includes this header, not the selection policy or the
/// side channel.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "weft/info/info.hpp"

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
    /// Spin on the queue: a core busy while waiting, never given away (for a
    /// process that owns its core; Waiting::adaptive costs it nothing measurable).
    spin,
    /// Sleep on the queue's wait object until something arrives: no CPU while
    /// idle (a wake-up costs ~20 us here), and a descriptor for an event
    /// loop (Node::fd). A progress thread then sleeps too while nothing happens.
    sleep,
    /// Spin, giving the core to another thread (sched_yield) after every 16
    /// empty polls: for more busy processes than cores (ranks oversubscribed
    /// on a machine, as Open MPI's yield_when_idle), where a spinning waiter
    /// would keep the very rank it waits for off the CPU.
    yield,
    /// Spin first, then yield (the default): each wait spins as Waiting::spin for 128 empty
    /// polls (a few microseconds), then gives the core away every 16 polls as
    /// Waiting::yield. Where cores are to spare a yield returns at once; where
    /// busy processes outnumber cores, a waiter does not keep the process it
    /// waits for off the CPU. Measured (weft-fanout-bench, bench/README.md):
    /// one-way latency as spin's (shm 0.97x, tcp 1.01x), a writer and two
    /// readers on 2 cores 20x spin's blocks per second on shm.
    adaptive,
};

/// How connecting retries a server that refuses or cannot be reached (it may
/// start late, or be restarting): exponential backoff from `initial` to `max`.
struct RetryPolicy {
    /// Connection attempts before giving up; 0 = keep trying until the deadline.
    int attempts = 0;
    std::chrono::milliseconds initial{10};
    std::chrono::milliseconds max{500};
    /// The client may call Connection::reconnect() after the server went away.
    bool reconnect = false;
};

/// Peers on this host (the same boot, network and pid namespaces), as their
/// Node addresses prove it (docs/same-host-lane.md).
enum class SameHost : std::uint8_t {
    /// The default: `lane` unless a provider was named (Options::provider or
    /// WEFT_PROVIDER), which then carries co-located peers too (`off`): a
    /// provider-matrix test exercises the provider it names. WEFT_SAME_HOST
    /// (off, lane, enforced) decides instead where it is set. The selection
    /// report says which it became, and why.
    automatic,
    /// libfabric alone, as for any peer.
    off,
    /// weft's same-host lane beside libfabric: RMA to memory weft allocated
    /// is a memcpy through a sealed shared mapping (read-only enforced by the
    /// kernel), to other registered memory a process_vm_writev/readv;
    /// notifications and messages go through shared rings. The selection
    /// report says which peers take it, and why others do not.
    lane,
    /// The lane where the kernel enforces access (sealed memory weft
    /// allocated); other registered memory is refused on it, and this process
    /// is made non-dumpable, which closes process_vm_* and /proc/<pid>/mem to
    /// its peers (for multi-tenant hosts).
    enforced,
};

/// Which provider, endpoint kind and device (select(), Selection).
struct SelectionOptions {
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
    /// The same-host lane for co-located peers (on unless a provider is named).
    SameHost same_host = SameHost::automatic;
};

/// Who drives progress, and how waits wait (Completions, ProgressThread).
struct ProgressOptions {
    Progress progress = Progress::automatic;
    /// How often a weft progress thread checks an endpoint; it drives progress
    /// only when the application has not polled since the last check.
    std::chrono::microseconds progress_interval{100};
    /// How waits wait (Waiting::sleep: no CPU while idle).
    Waiting waiting = Waiting::adaptive;
    /// Pin progress threads to this CPU (e.g. one near the device); none = unpinned.
    std::optional<int> progress_cpu;
};

/// An endpoint's queues and receive slots (Endpoint).
struct EndpointOptions {
    /// Transmit / receive queue depth (0 = provider default, capped to device limits).
    std::size_t tx_depth = 0;
    std::size_t rx_depth = 0;
    /// Receive slots per endpoint for messages and notifications, and their size.
    /// A message larger than slot_size is rejected before it is sent.
    std::size_t rx_slots = 16;
    std::size_t slot_size = 8192;
};

/// How two peers meet on the side channel (SideChannel, Server, Connection).
struct BootstrapOptions {
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

/// Every layer's options. Set fields by name (`o.provider = "tcp"`); a
/// designated initializer names the layer: `Options{{.allow_shm = true}}`.
struct Options : SelectionOptions, ProgressOptions, EndpointOptions, BootstrapOptions {};

/// True when endpoints opened with these options run a weft progress thread:
/// Progress::thread, or Progress::automatic where a passive target would
/// otherwise stall (Quirks::target_needs_progress).
bool wants_progress_thread(const ProgressOptions& options, const Quirks& quirks) noexcept;

} // namespace weft
