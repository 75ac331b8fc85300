// SPDX-License-Identifier: MIT
/// @brief What `weft bench` and the raw-libfabric baseline share: the patterns,
/// the sweep, the two-process orchestration and the output (fabtests-style
/// columns, JSON, a plot). The data path is each side's own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>


#include "weft/bootstrap/bootstrap.hpp"
#include "weft/info/info.hpp"

namespace CLI {
class App;
} // namespace CLI

namespace weft::bench {

enum class Pattern {
    lat_write,  ///< RMA write ping-pong; the target polls the last bytes (ib_write_lat style)
    lat_read,   ///< RMA read from a passive target, one at a time
    lat_notify, ///< write-with-notify ping-pong
    bw_write,   ///< windowed RMA writes (queue depth)
    bw_read,    ///< windowed RMA reads
    bw_notify,  ///< windowed writes-with-notify; the target counts them
    rate,       ///< small writes in batches, a completion every 16: operations per second
    iops,       ///< reads at queue depth, random offsets in a 64 MiB region: the storage pattern
    cpu_write,  ///< post one write, reap its completion, repeat: instructions per operation
    reg_cache,  ///< local: registration cache hit vs miss (a registration) cost
    pool,       ///< local: buffer pool get + return, one thread and two
};
std::string_view to_string(Pattern p) noexcept;
std::optional<Pattern> parse_pattern(std::string_view text);

struct Config {
    Pattern pattern = Pattern::lat_write;
    std::string provider;                ///< "" = automatic
    std::optional<EndpointKind> kind;
    bool allow_shm = false;
    bool lane = false;                   ///< weft: the same-host lane (SameHost::lane)
    std::string node;                    ///< address to bind (both ends use it in the default mode)
    std::vector<std::size_t> sizes;      ///< empty = the pattern's default sweep
    std::uint64_t iterations = 0;        ///< per size, at most (0 = pattern default)
    std::chrono::milliseconds budget{400}; ///< per size, at most
    std::size_t queue_depth = 64;
    bool json = false;
    std::string plot;                    ///< write a plot of the sweep; the extension names the format
    std::string plot_terminal;           ///< the gnuplot terminal for `plot` (set with it)
    bool plot_script = false;            ///< keep the gnuplot script (with the data) as plot + ".gp"
    bool quiet = false;
    bool progress = false;               ///< print one line per size to stderr
    std::string server;                  ///< [host:]port: serve one client
    std::string connect;                 ///< host:port: be the client
    std::chrono::seconds timeout{30};
    std::optional<int> progress_cpu; ///< weft: run a progress thread pinned to this CPU
    bool near_device = false;        ///< weft: buffers on the device's NUMA node
    std::string file;                ///< weft: the target exposes this file (mmap) to reads
    bool pin = false;                ///< both ends here: each on a CPU of its own
    int pair_blocks = 15;            ///< run_pair: block pairs per size
};

void add_options(CLI::App& app, Config& config);

/// The spread of one round's per-transfer times (microseconds), from the
/// times of its single iterations.
struct Spread {
    double min = 0;
    double median = 0;
    double p99 = 0;
    double p99_9 = 0;
};

struct Row {
    std::size_t size = 0;
    std::uint64_t iterations = 0;
    double seconds = 0;
    int transfers_per_iteration = 1;
    std::uint64_t instructions = 0; ///< under callgrind: instructions in the timed loop
    std::optional<Spread> spread;   ///< when the end timed each iteration
};

/// The times of each iteration of one timed loop, taken as perftest takes
/// them: one read of the CPU's cycle counter per iteration (no system call,
/// even where the clock source has no vDSO), scaled to seconds by
/// steady_clock across the whole loop.
class IterationTimes {
public:
    /// Before the loop: forgets the last loop's times.
    void start(std::uint64_t iterations);
    /// After each iteration.
    void lap() noexcept { ticks_.push_back(now()); }
    /// After the loop.
    void stop();
    /// Seconds per iteration of the last loop.
    std::span<const double> seconds() const noexcept { return seconds_; }

private:
    static std::uint64_t now() noexcept;
    std::vector<std::uint64_t> ticks_; ///< the counter after each iteration, the start first
    std::vector<double> seconds_;
    std::chrono::steady_clock::time_point start_;
};

/// A plan the client sends the server before each round.
struct Plan {
    Pattern pattern;
    std::uint64_t size;       // 0 ends the session
    std::uint64_t iterations;
    std::uint64_t queue_depth;
};
void send_plan(SideChannel& side, const Plan& plan, Deadline deadline);
Plan receive_plan(SideChannel& side, Deadline deadline);

/// The transport-specific half: one connected end.
class End {
public:
    virtual ~End() = default;
    /// Client: runs one round and returns its duration (seconds).
    virtual double round(const Plan& plan) = 0;
    /// Server: its part of one round (echo, count, or stay passive), until the
    /// client's "round done" arrives on the side channel.
    virtual void serve(const Plan& plan) = 0;
    /// What ran: "weft tcp MSG" / "raw tcp MSG".
    virtual std::string describe() const = 0;
    /// Client, after round(): the time of each iteration of the round (seconds),
    /// where the end takes them (weft's lat-write, lat-read, lat-notify); empty
    /// where it does not.
    virtual std::span<const double> iteration_times() const { return {}; }
    virtual SideChannel& side() = 0;
};

/// How a tool makes its ends.
struct Factory {
    std::string label; ///< "weft" or "raw"
    std::function<std::unique_ptr<End>(const Config&, SideListener&)> accept;
    std::function<std::unique_ptr<End>(const Config&, const std::string& host_port)> connect;
    /// Patterns without a peer (reg-cache, pool); empty when the tool has none.
    std::function<int(const Config&)> local;
};

/// Runs the configured roles (both ends on this machine by default) and prints
/// the results. Returns the exit status.
int run(const Config& config, const Factory& factory);

/// Both ends of two tools in one run (both on this machine), connected at the
/// same time: per size, blocks of `a` and `b` alternate (ABBA...), and each
/// adjacent pair gives one ratio a/b in the pattern's metric, so that the
/// machine's slow and fast moments cancel. Prints the median ratio and its
/// quartiles. Returns the exit status.
/// `config_b` may differ from `config_a` in what selects the transport (to
/// pair two paths); the pattern, sizes and budget are `config_a`'s. Both
/// configurations must outlive the call.
int run_pair(const Config& config_a, const Factory& a, const Config& config_b, const Factory& b);

/// The largest buffer a pattern needs for `size`.
std::size_t region_size(Pattern p, std::size_t size, std::size_t queue_depth);

/// The size of the random-access region of Pattern::iops.
inline constexpr std::size_t iops_region = 64u << 20;

/// "host:port" ("[v6]:port") as its parts; a UsageError naming the mistake.
std::pair<std::string, std::uint16_t> host_and_port(const std::string& host_port);

/// The ceiling of shm's large transfers: process_vm_writev of `size` bytes
/// into another process for `budget`, printed as one JSON line. Returns 0.
int cma_ceiling(std::size_t size, std::chrono::milliseconds budget);

/// The ceiling of any request and answer over loopback TCP here: `clients`
/// processes of one connection each send `depth` requests of 64 B at once and
/// wait for their answers of `size` bytes, once sleeping in recv and once
/// polling it; one server answers them from an epoll set it polls without
/// sleeping. No libfabric: a provider over these sockets cannot do more. One
/// JSON line (answers a second, all clients together, each way and the best);
/// returns 0.
int tcp_echo_ceiling(int clients, std::size_t size, std::size_t depth, std::chrono::milliseconds budget);

/// Callgrind markers around the timed loop (no-ops outside valgrind).
void instrumentation_start() noexcept;
void instrumentation_stop() noexcept;

} // namespace weft::bench
