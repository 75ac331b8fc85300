// SPDX-License-Identifier: MIT
// One tool's run: its options, the sweep on the client, the server's loop,
// both ends on this machine (tool::fork_pair), the columns and the JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cpus.hpp"
#include "fork_pair.hpp"
#include "harness_parts.hpp"
#include "size_options.hpp"
#include "socket.hpp"

namespace weft::bench {
namespace {

using namespace std::chrono;
using namespace parts;

/// The q-quantile (nearest rank, as perftest reports) of sorted values.
double nearest_rank(const std::vector<double>& sorted, double q)
{
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

/// The spread of the per-transfer times, from an end's iteration times.
std::optional<Spread> spread_of(std::span<const double> iteration_seconds, int xfers)
{
    if (iteration_seconds.empty())
        return std::nullopt;
    std::vector<double> usec(iteration_seconds.begin(), iteration_seconds.end());
    for (double& u : usec)
        u *= 1e6 / xfers;
    std::sort(usec.begin(), usec.end());
    return Spread{usec.front(), nearest_rank(usec, 0.5), nearest_rank(usec, 0.99),
                  nearest_rank(usec, 0.999)};
}

/// A rate in a column `width` wide, with `decimals` places, or with three
/// significant digits where those places would show a rate above zero as 0:
/// on a loaded machine a ping-pong's hop waits for a time slice, and 4 ms a
/// transfer is 0.00025 Mxfers/sec ("tools: bench on a loaded machine prints
/// no number as 0").
std::string rate_column(double rate, int width, int decimals)
{
    if (rate > 0 && rate < 0.5 * std::pow(10.0, -decimals))
        decimals = std::min(9, 2 - static_cast<int>(std::floor(std::log10(rate))));
    return fmt::format("{:>{}.{}f}", rate, width, decimals);
}

void print_row(const Row& row)
{
    const double x = static_cast<double>(row.iterations) * row.transfers_per_iteration;
    std::printf("%-10s%-8s%-8s%7.2fs %s%13.2f%s",
                tool::size_text(static_cast<double>(row.size)).c_str(),
                tool::size_text(static_cast<double>(row.iterations)).c_str(),
                tool::size_text(x * static_cast<double>(row.size)).c_str(), row.seconds,
                rate_column(mb_per_s(row), 10, 2).c_str(), usec_per_xfer(row),
                rate_column(x / row.seconds / 1e6, 13, 3).c_str());
    if (row.spread)
        std::printf("%10.2f%10.2f%10.2f%10.2f", row.spread->min, row.spread->median,
                    row.spread->p99, row.spread->p99_9);
    std::printf("\n");
    std::fflush(stdout);
}

int client(const Config& cfg, End& end, const std::string& label)
{
    std::vector<Row> rows;
    const auto sizes = cfg.sizes.empty() ? default_sizes(cfg.pattern) : cfg.sizes;
    const int xfers = transfers_per_iteration(cfg.pattern);
    const auto title = fmt::format("{} {} ({})", label, to_string(cfg.pattern), end.describe());
    const bool table = !cfg.quiet && !cfg.json;
    std::size_t n = 0;
    for (const std::size_t size : sizes) {
        ++n;
        if (cfg.progress)
            std::fprintf(stderr, "bench: [%zu/%zu] %s %zu B\n", n, sizes.size(),
                         std::string(to_string(cfg.pattern)).c_str(), size);
        const std::uint64_t iters = fit_budget(cfg, size, {&end});
        instrumentation_start();
        Row row{size, iters, end.round({cfg.pattern, size, iters, cfg.queue_depth}), xfers};
        instrumentation_stop();
        row.spread = spread_of(end.iteration_times(), xfers);
        rows.push_back(row);
        if (table && n == 1) { // the columns follow what the end measures
            std::printf("# %s, queue depth %zu%s\n", title.c_str(),
                        is_latency(cfg.pattern) ? std::size_t{1} : cfg.queue_depth,
                        row.spread ? "; usec/xfer is the mean, min .. p99.9 the spread of "
                                     "single iterations (usec per transfer)"
                                   : "");
            std::printf("%-10s%-8s%-8s%8s %10s%13s%13s", "bytes", "iters", "total", "time",
                        "MB/sec", "usec/xfer", "Mxfers/sec");
            if (row.spread)
                std::printf("%10s%10s%10s%10s", "min", "median", "p99", "p99.9");
            std::printf("\n");
        }
        if (table)
            print_row(row);
    }
    send_plan(end.side(), {cfg.pattern, 0, 0, 0}, Deadline::after(cfg.timeout));
    if (cfg.json) {
        nlohmann::json j;
        j["tool"] = label;
        j["pattern"] = to_string(cfg.pattern);
        j["transport"] = end.describe();
        j["queue_depth"] = is_latency(cfg.pattern) ? 1 : cfg.queue_depth;
        for (const auto& r : rows) {
            nlohmann::json row = {
                {"bytes", r.size},
                {"iterations", r.iterations},
                {"seconds", r.seconds},
                {"mb_per_s", mb_per_s(r)},
                {"usec_per_xfer", usec_per_xfer(r)},
                {"mxfers_per_s",
                 static_cast<double>(r.iterations) * r.transfers_per_iteration / r.seconds / 1e6}};
            if (r.spread) {
                row["usec_per_xfer_min"] = r.spread->min;
                row["usec_per_xfer_median"] = r.spread->median;
                row["usec_per_xfer_p99"] = r.spread->p99;
                row["usec_per_xfer_p99_9"] = r.spread->p99_9;
            }
            j["rows"].push_back(row);
        }
        std::printf("%s\n", j.dump().c_str());
    }
    if (!cfg.plot.empty() && !write_plot(cfg, title, rows))
        return 1;
    return 0;
}

void server(End& end)
{
    for (;;) {
        const Plan plan = receive_plan(end.side(), Deadline::after(std::chrono::hours(1)));
        if (plan.size == 0)
            return;
        end.serve(plan);
    }
}

int run_both(const Config& cfg, const Factory& factory)
{
    return run_forked(
        cfg, 1,
        [&](std::vector<SideListener>& listeners) {
            auto end = factory.accept(cfg, listeners[0]);
            server(*end);
        },
        [&](const std::vector<std::string>& host_ports) {
            auto end = factory.connect(cfg, host_ports[0]);
            return client(cfg, *end, factory.label);
        });
}

} // namespace

namespace parts {

std::uint64_t fit_budget(const Config& cfg, std::size_t size, std::initializer_list<End*> ends)
{
    const std::uint64_t cap = cfg.iterations ? cfg.iterations : default_iterations(cfg.pattern);
    const std::uint64_t warm =
        std::min<std::uint64_t>(cap, is_latency(cfg.pattern) ? 50 : 2 * cfg.queue_depth);
    double t = 0;
    for (End* e : ends)
        t = std::max(t, e->round({cfg.pattern, size, warm, cfg.queue_depth}));
    const double per = t / static_cast<double>(warm);
    const double budget = duration<double>(cfg.budget).count();
    if (per > 0 && per * static_cast<double>(cap) > budget)
        return std::max<std::uint64_t>(warm, static_cast<std::uint64_t>(budget / per));
    return cap;
}

double mb_per_s(const Row& r)
{
    return static_cast<double>(r.iterations) * r.transfers_per_iteration *
           static_cast<double>(r.size) / r.seconds / 1e6;
}
double usec_per_xfer(const Row& r)
{
    return r.seconds * 1e6 / (static_cast<double>(r.iterations) * r.transfers_per_iteration);
}

int run_forked(const Config& cfg, std::size_t listeners,
               const std::function<void(std::vector<SideListener>&)>& serve,
               const std::function<int(const std::vector<std::string>& host_ports)>& drive)
{
    const std::string host = cfg.node.empty() ? "127.0.0.1" : cfg.node;
    tool::warn_if_oversubscribed("bench", busy_ends(cfg.pattern));
    return tool::fork_pair(
        host, cfg.timeout, cfg.pin ? tool::pinned_pair("bench") : std::nullopt,
        [&](const tool::Announce& announce) {
            std::vector<SideListener> ls;
            std::vector<std::uint16_t> ports;
            for (std::size_t i = 0; i < listeners; ++i) {
                ls.emplace_back(host, 0);
                ports.push_back(ls.back().port());
            }
            announce(ports);
            serve(ls);
        },
        drive);
}

} // namespace parts

void add_options(CLI::App& app, Config& cfg)
{
    app.add_option_function<std::string>(
           "pattern",
           [&](const std::string& v) {
               if (auto p = parse_pattern(v))
                   cfg.pattern = *p;
               else
                   throw CLI::ValidationError("pattern", "one of lat-write, lat-read, lat-notify, "
                                                         "bw-write, bw-read, bw-notify, rate, iops, "
                                                         "cpu-write, reg-cache, pool");
           },
           "lat-write (default), lat-read, lat-notify, bw-write, bw-read, bw-notify, rate, iops, "
           "cpu-write, reg-cache, pool");
    app.add_option("-p,--provider", cfg.provider, "provider (default: automatic)");
    app.add_flag_callback("--rdm", [&] { cfg.kind = EndpointKind::rdm; }, "RDM endpoints");
    app.add_flag_callback("--msg", [&] { cfg.kind = EndpointKind::msg; }, "MSG endpoints");
    app.add_flag("--shm", cfg.allow_shm, "allow shared memory");
    app.add_flag("--lane", cfg.lane,
                 "weft: the same-host lane for co-located ends (Options::same_host)");
    app.add_option("--bind", cfg.node, "address both ends bind to (default 127.0.0.1)");
    tool::add_size_list_option(app, "-s,--sizes", cfg.sizes,
                               "sizes, e.g. 8,4k,64k,1m (default: 8 B .. 4 MiB)");
    tool::add_count_option(app, "-n,--iters", cfg.iterations, "iterations per size, at most");
    app.add_option_function<int>("--budget-ms", [&](int v) { cfg.budget = milliseconds(v); },
                                 "time per size, at most (default 400)")
        ->check(CLI::Range(1, 3'600'000).description(""))
        ->type_name("MS");
    app.add_option("-q,--queue-depth", cfg.queue_depth, "operations in flight (bw, rate, iops)")
        ->check(CLI::Range(1, 4096));
    app.add_flag("--json", cfg.json, "one JSON object on stdout");
    app.add_option_function<std::string>(
           "--plot",
           [&](const std::string& v) {
               cfg.plot_terminal = plot_terminal_for(v);
               cfg.plot = v;
           },
           "plot the sweep to FILE; its extension names the format: .png, .svg, .pdf, .jpg, "
           ".gif (needs gnuplot)")
        ->type_name("FILE");
    app.add_flag("--plot-script", cfg.plot_script,
                 "keep the plot's gnuplot script, with the data, as FILE.gp");
    app.add_flag("--progress", cfg.progress, "one line per size on stderr");
    app.add_option("--server", cfg.server, "serve one client on [host:]port");
    app.add_option("--connect", cfg.connect, "run against a server at host:port");
    app.add_option_function<int>("--timeout", [&](int v) { cfg.timeout = seconds(v); },
                                 "seconds any single wait may take (default 30)")
        ->check(CLI::Range(1, 86'400).description(""))
        ->type_name("SECONDS");
    app.add_option_function<int>("--progress-thread", [&](int cpu) { cfg.progress_cpu = cpu; },
                                 "weft: run a progress thread on both ends, pinned to CPU");
    app.add_flag("--pin", cfg.pin,
                 "both ends on this machine: the server on the first CPU this process may use, "
                 "the client on the second");
    app.add_flag("--near-device", cfg.near_device, "weft: allocate buffers near the device (NUMA)");
    app.add_option("--file", cfg.file, "weft: the target exposes this file (mmap) to the reads");
}

std::pair<std::string, std::uint16_t> host_and_port(const std::string& host_port)
{
    return split_host_port(host_port);
}

int run(const Config& cfg, const Factory& factory)
{
    if (cfg.pattern == Pattern::reg_cache || cfg.pattern == Pattern::pool) {
        if (!factory.local)
            throw std::runtime_error(fmt::format("{} has no {} pattern", factory.label,
                                                 to_string(cfg.pattern)));
        return factory.local(cfg);
    }
    if (cfg.pin && (!cfg.server.empty() || !cfg.connect.empty()))
        throw std::runtime_error("--pin places both ends of a run on this machine; with "
                                 "--server or --connect, start each end under `taskset -c CPU`");
    if (!cfg.server.empty() || !cfg.connect.empty())
        tool::warn_if_oversubscribed("bench", 1); // this end polls
    if (!cfg.server.empty()) {
        auto [host, port] = split_host_port(cfg.server.find(':') == std::string::npos
                                                ? "0.0.0.0:" + cfg.server
                                                : cfg.server);
        SideListener listener(host, port);
        auto end = factory.accept(cfg, listener);
        server(*end);
        return 0;
    }
    if (!cfg.connect.empty()) {
        auto end = factory.connect(cfg, cfg.connect);
        return client(cfg, *end, factory.label);
    }
    return run_both(cfg, factory);
}

} // namespace weft::bench
