// SPDX-License-Identifier: MIT
#include "common.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cpus.hpp"
#include "fork_pair.hpp"
#include "sizes.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define WEFT_HAVE_CALLGRIND 1
#endif

namespace weft::bench {
namespace {

using namespace std::chrono;

constexpr std::pair<Pattern, std::string_view> names[] = {
    {Pattern::lat_write, "lat-write"}, {Pattern::lat_read, "lat-read"},
    {Pattern::lat_notify, "lat-notify"}, {Pattern::bw_write, "bw-write"},
    {Pattern::bw_read, "bw-read"},     {Pattern::bw_notify, "bw-notify"},
    {Pattern::rate, "rate"},           {Pattern::iops, "iops"},
    {Pattern::cpu_write, "cpu-write"}, {Pattern::reg_cache, "reg-cache"},
    {Pattern::pool, "pool"},
};

bool is_latency(Pattern p)
{
    return p == Pattern::lat_write || p == Pattern::lat_read || p == Pattern::lat_notify ||
           p == Pattern::cpu_write;
}

std::vector<std::size_t> default_sizes(Pattern p)
{
    switch (p) {
    case Pattern::rate:
    case Pattern::cpu_write: return {8};
    case Pattern::iops: return {4096};
    default: break;
    }
    std::vector<std::size_t> out;
    for (std::size_t s = 8; s <= (std::size_t{4} << 20); s *= 2)
        out.push_back(s);
    return out;
}

std::uint64_t default_iterations(Pattern p)
{
    switch (p) {
    case Pattern::lat_write:
    case Pattern::lat_read:
    case Pattern::lat_notify: return 2000;
    case Pattern::cpu_write: return 20000;
    case Pattern::rate: return 200000;
    default: return 20000;
    }
}

/// The ends of a run on this machine that poll without sleeping: the client,
/// and the server where it answers or counts (a passive target sleeps on the
/// side channel, unless its provider needs it to drive progress).
int busy_ends(Pattern p)
{
    return p == Pattern::lat_write || p == Pattern::lat_notify || p == Pattern::bw_notify ? 2 : 1;
}

/// Ping-pong patterns count both directions.
int transfers_per_iteration(Pattern p)
{
    return p == Pattern::lat_write || p == Pattern::lat_notify ? 2 : 1;
}

/// Warms each end up at `size`, then returns the iteration count of a timed
/// round that fits the budget (the slowest end's pace decides).
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

/// A size as an axis label: 8, 512, 1K, 1.5K, 64K, 4M, 1G.
std::string axis_label(std::size_t v)
{
    constexpr std::pair<std::size_t, const char*> units[] = {
        {std::size_t{1} << 30, "G"}, {std::size_t{1} << 20, "M"}, {std::size_t{1} << 10, "K"}};
    for (const auto& [unit, name] : units)
        if (v >= unit)
            return fmt::format("{:.3g}{}", static_cast<double>(v) / static_cast<double>(unit), name);
    return std::to_string(v);
}

/// A string inside single quotes in a gnuplot script ('' is a quote).
std::string gp_quote(const std::string& text)
{
    std::string out = "'";
    for (const char c : text)
        out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// The gnuplot script of the plot, the data inline (nothing beside it to clean up).
std::string gnuplot_script(const std::string& path, const std::string& terminal, Pattern p,
                        const std::string& title, const std::vector<Row>& rows)
{
    const bool vector = terminal == "pdfcairo" || terminal == "epscairo";
    std::ostringstream g;
    g << "set terminal " << terminal << (vector ? " size 9in,5.4in" : " size 900,540") << "\n"
      << "set output " << gp_quote(path) << "\n"
      << "set title " << gp_quote(title) << " noenhanced\n"
      << "set logscale x 2\nset grid\nset key off\n"
      << "set xlabel 'bytes'\n"
      << "set ylabel '" << (is_latency(p) ? "usec per transfer (one way)" : "MB/s") << "'\n"
      << (is_latency(p) ? "set logscale y 10\n" : "");
    // One tic per size measured, in K/M/G, slanted when there are many.
    g << "set xtics (";
    for (std::size_t i = 0; i < rows.size(); ++i)
        g << (i ? ", " : "") << '"' << axis_label(rows[i].size) << "\" " << rows[i].size;
    g << ")" << (rows.size() > 10 ? " rotate by -45" : "") << "\n";
    if (rows.size() == 1) // one point: give the log axis a range around it
        g << "set xrange [" << rows[0].size / 2 << ":" << rows[0].size * 2 << "]\n";
    g << "$data << EOD\n";
    for (const auto& r : rows)
        g << r.size << ' ' << (is_latency(p) ? usec_per_xfer(r) : mb_per_s(r)) << '\n';
    g << "EOD\nplot $data using 1:2 with linespoints lw 2 pt 7\n";
    return g.str();
}

/// Writes the plot with gnuplot; false (having said why) when it could not.
bool write_plot(const Config& cfg, const std::string& title, const std::vector<Row>& rows)
{
    const std::string script = gnuplot_script(cfg.plot, cfg.plot_terminal, cfg.pattern, title, rows);
    if (cfg.plot_script) {
        std::ofstream(cfg.plot + ".gp") << script;
    }
    std::error_code ec;
    std::filesystem::remove(cfg.plot, ec); // so that a stale file cannot pass for a new one
    std::FILE* gp = ::popen("gnuplot", "w");
    if (!gp) {
        std::fprintf(stderr, "bench: could not start gnuplot: %s\n", std::strerror(errno));
        return false;
    }
    std::fwrite(script.data(), 1, script.size(), gp);
    const int rc = ::pclose(gp);
    if (rc != 0 || std::filesystem::file_size(cfg.plot, ec) == 0 || ec) {
        std::fprintf(stderr, "bench: gnuplot did not write %s (exit status %d; its message, if "
                             "any, is above)\n",
                     cfg.plot.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
        return false;
    }
    return true;
}

/// The gnuplot terminal `--plot FILE` needs (its extension names the format),
/// after checking that gnuplot has it and that FILE's directory exists: at
/// parse time, before a run that may take minutes.
std::string plot_terminal_for(const std::string& path)
{
    namespace fs = std::filesystem;
    const auto fail = [](const std::string& why) { return CLI::ValidationError("--plot", why); };
    std::string ext = fs::path(path).extension().string();
    for (char& c : ext)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Each format with the terminals that write it, the better first.
    const std::vector<std::pair<std::string, std::vector<std::string>>> formats = {
        {".png", {"pngcairo", "png"}}, {".svg", {"svg"}},   {".pdf", {"pdfcairo", "pdf"}},
        {".jpg", {"jpeg"}},            {".jpeg", {"jpeg"}}, {".gif", {"gif"}},
    };
    const auto known = std::find_if(formats.begin(), formats.end(),
                                    [&](const auto& f) { return f.first == ext; });
    if (known == formats.end())
        throw fail(fmt::format("'{}': {}; the extension names the format: .png, .svg, .pdf, "
                               ".jpg or .gif",
                               path, ext.empty() ? "no extension" : "unknown format '" + ext + "'"));
    const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".")
                                                              : fs::path(path).parent_path();
    std::error_code ec;
    if (!fs::exists(dir, ec))
        throw fail(fmt::format("'{}': the directory {} does not exist (mkdir -p {})", path,
                               dir.string(), dir.string()));
    if (!fs::is_directory(dir, ec))
        throw fail(fmt::format("'{}': {} is not a directory", path, dir.string()));
    if (::access(dir.c_str(), W_OK) != 0)
        throw fail(fmt::format("'{}': the directory {} is not writable: {}", path, dir.string(),
                               std::strerror(errno)));
    std::string terminals;
    if (std::FILE* f = ::popen("gnuplot -e 'print GPVAL_TERMINALS' 2>&1", "r")) {
        char buf[4096];
        while (const std::size_t n = std::fread(buf, 1, sizeof buf, f))
            terminals.append(buf, n);
        if (::pclose(f) != 0)
            terminals.clear();
    }
    if (terminals.empty())
        throw fail("needs gnuplot, which is not installed (apt-get install gnuplot-nox)");
    std::istringstream words(terminals);
    std::vector<std::string> have{std::istream_iterator<std::string>(words),
                                  std::istream_iterator<std::string>()};
    const auto has = [&](const std::string& t) {
        return std::find(have.begin(), have.end(), t) != have.end();
    };
    for (const auto& t : known->second)
        if (has(t))
            return t;
    std::string can;
    for (const auto& [e, ts] : formats)
        if (std::any_of(ts.begin(), ts.end(), has))
            can += (can.empty() ? "" : ", ") + e;
    throw fail(fmt::format("'{}': this gnuplot cannot write {} (it has no {} terminal); it can "
                           "write {}",
                           path, ext, known->second.front(), can));
}

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

void print_row(const Row& row)
{
    const double x = static_cast<double>(row.iterations) * row.transfers_per_iteration;
    std::printf("%-10s%-8s%-8s%7.2fs %10.2f%13.2f%13.3f",
                tool::size_text(static_cast<double>(row.size)).c_str(),
                tool::size_text(static_cast<double>(row.iterations)).c_str(),
                tool::size_text(x * static_cast<double>(row.size)).c_str(), row.seconds, mb_per_s(row),
                usec_per_xfer(row), x / row.seconds / 1e6);
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

void server(const Config& cfg, End& end)
{
    for (;;) {
        const Plan plan = receive_plan(end.side(), Deadline::after(std::chrono::hours(1)));
        if (plan.size == 0)
            return;
        end.serve(plan);
    }
    (void)cfg;
}

/// Forks: the child opens `listeners` side-channel listeners and runs `serve`
/// (the server ends), the parent runs `drive` against them (the client ends,
/// one host:port per listener) and reaps the child. With cfg.pin, the server
/// and the client each run on a CPU of their own (tool::plan_pinning).
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

int run_both(const Config& cfg, const Factory& factory)
{
    return run_forked(
        cfg, 1,
        [&](std::vector<SideListener>& listeners) {
            auto end = factory.accept(cfg, listeners[0]);
            server(cfg, *end);
        },
        [&](const std::vector<std::string>& host_ports) {
            auto end = factory.connect(cfg, host_ports[0]);
            return client(cfg, *end, factory.label);
        });
}

/// The server half of a pair: serves whichever end's client sent a plan, until
/// both said they are done.
void serve_pair(const Config& cfg, End& a, End& b)
{
    std::array<End*, 2> ends{&a, &b};
    std::array<bool, 2> open{true, true};
    while (open[0] || open[1]) {
        bool served = false;
        for (std::size_t i = 0; i < 2; ++i) {
            if (!open[i] || !ends[i]->side().readable())
                continue;
            const Plan plan = receive_plan(ends[i]->side(), Deadline::after(cfg.timeout));
            if (plan.size == 0)
                open[i] = false;
            else
                ends[i]->serve(plan);
            served = true;
        }
        if (!served) {
            std::array<pollfd, 2> p{pollfd{a.side().fd(), POLLIN, 0}, pollfd{b.side().fd(), POLLIN, 0}};
            (void)::poll(p.data(), 2, 100);
        }
    }
}

double quantile(std::vector<double> v, double q)
{
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(pos);
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

/// The client half of a pair: per size, `blocks` pairs of rounds of the same
/// iteration count, A then B and B then A alternately, each pair's ratio taken
/// at once; reports the median ratio and its quartiles.
int drive_pair(const Config& cfg, End& a, End& b, const std::string& label_a,
               const std::string& label_b)
{
    const auto sizes = cfg.sizes.empty() ? default_sizes(cfg.pattern) : cfg.sizes;
    const int xfers = transfers_per_iteration(cfg.pattern);
    const bool latency = is_latency(cfg.pattern);
    const int blocks = std::max(1, cfg.pair_blocks);
    nlohmann::json j;
    j["pattern"] = to_string(cfg.pattern);
    j["a"] = {{"tool", label_a}, {"transport", a.describe()}};
    j["b"] = {{"tool", label_b}, {"transport", b.describe()}};
    j["blocks"] = blocks;
    j["metric"] = latency ? "usec_per_xfer" : "mb_per_s";
    if (!cfg.json) {
        std::printf("# %s vs %s, %s, %d interleaved block pairs per size; ratio = %s/%s of %s "
                    "(median [quartiles] of the pairs)\n",
                    label_a.c_str(), label_b.c_str(), std::string(to_string(cfg.pattern)).c_str(),
                    blocks, label_a.c_str(), label_b.c_str(), latency ? "usec/xfer" : "MB/sec");
        std::printf("%-10s%-8s%14s%14s%10s%20s\n", "bytes", "iters", label_a.c_str(),
                    label_b.c_str(), "ratio", "[q1, q3]");
    }
    for (const std::size_t size : sizes) {
        if (cfg.progress)
            std::fprintf(stderr, "bench: pair %s %zu B\n", std::string(to_string(cfg.pattern)).c_str(), size);
        const std::uint64_t iters = fit_budget(cfg, size, {&a, &b});
        const Plan plan{cfg.pattern, size, iters, cfg.queue_depth};
        std::vector<double> va, vb, ratio;
        for (int k = 0; k < blocks; ++k) {
            double ta = 0, tb = 0;
            if (k % 2 == 0) {
                ta = a.round(plan);
                tb = b.round(plan);
            } else {
                tb = b.round(plan);
                ta = a.round(plan);
            }
            const Row ra{size, iters, ta, xfers}, rb{size, iters, tb, xfers};
            va.push_back(latency ? usec_per_xfer(ra) : mb_per_s(ra));
            vb.push_back(latency ? usec_per_xfer(rb) : mb_per_s(rb));
            ratio.push_back(va.back() / vb.back());
        }
        const double r = quantile(ratio, 0.5), q1 = quantile(ratio, 0.25), q3 = quantile(ratio, 0.75);
        if (!cfg.json) {
            std::printf("%-10s%-8s%14.3f%14.3f%10.3f%20s\n", tool::size_text(static_cast<double>(size)).c_str(),
                        tool::size_text(static_cast<double>(iters)).c_str(), quantile(va, 0.5),
                        quantile(vb, 0.5), r, fmt::format("[{:.3f}, {:.3f}]", q1, q3).c_str());
            std::fflush(stdout);
        }
        j["rows"].push_back({{"bytes", size},
                             {"iterations", iters},
                             {"a", quantile(va, 0.5)},
                             {"b", quantile(vb, 0.5)},
                             {"ratio", r},
                             {"ratio_q1", q1},
                             {"ratio_q3", q3},
                             {"ratios", ratio}});
    }
    send_plan(a.side(), {cfg.pattern, 0, 0, 0}, Deadline::after(cfg.timeout));
    send_plan(b.side(), {cfg.pattern, 0, 0, 0}, Deadline::after(cfg.timeout));
    if (cfg.json)
        std::printf("%s\n", j.dump().c_str());
    return 0;
}

} // namespace

std::string_view to_string(Pattern p) noexcept
{
    for (const auto& [pattern, name] : names)
        if (pattern == p)
            return name;
    return "?";
}

std::optional<Pattern> parse_pattern(std::string_view text)
{
    for (const auto& [pattern, name] : names)
        if (name == text)
            return pattern;
    return std::nullopt;
}

std::size_t region_size(Pattern p, std::size_t size, std::size_t queue_depth)
{
    if (p == Pattern::iops)
        return std::max(iops_region, size);
    if (p == Pattern::rate)
        return size * std::max<std::size_t>(queue_depth, 1) * 16;
    return size;
}

void send_plan(SideChannel& side, const Plan& plan, Deadline deadline)
{
    std::array<std::byte, 32> b{};
    const std::uint64_t fields[4] = {static_cast<std::uint64_t>(plan.pattern), plan.size,
                                     plan.iterations, plan.queue_depth};
    std::memcpy(b.data(), fields, sizeof fields);
    side.send(Frame::data, b, deadline);
}

Plan receive_plan(SideChannel& side, Deadline deadline)
{
    const auto b = side.receive(Frame::data, deadline);
    if (b.size() != 32)
        throw std::runtime_error("malformed plan from the benchmark client");
    std::uint64_t f[4];
    std::memcpy(f, b.data(), sizeof f);
    return {static_cast<Pattern>(f[0]), f[1], f[2], f[3]};
}

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
        server(cfg, *end);
        return 0;
    }
    if (!cfg.connect.empty()) {
        auto end = factory.connect(cfg, cfg.connect);
        return client(cfg, *end, factory.label);
    }
    return run_both(cfg, factory);
}

int run_pair(const Config& cfg_a, const Factory& a, const Config& cfg_b, const Factory& b)
{
    for (const Config* c : {&cfg_a, &cfg_b})
        if (c->pattern == Pattern::reg_cache || c->pattern == Pattern::pool ||
            c->pattern == Pattern::cpu_write)
            throw std::runtime_error("pairs are for the two-ended timed patterns");
    // One listener per end: weft's Server takes its listener over.
    return run_forked(
        cfg_a, 2,
        [&](std::vector<SideListener>& listeners) {
            auto ea = a.accept(cfg_a, listeners[0]);
            auto eb = b.accept(cfg_b, listeners[1]);
            serve_pair(cfg_a, *ea, *eb);
        },
        [&](const std::vector<std::string>& host_ports) {
            auto ea = a.connect(cfg_a, host_ports[0]);
            auto eb = b.connect(cfg_b, host_ports[1]);
            return drive_pair(cfg_a, *ea, *eb, a.label, b.label);
        });
}

void IterationTimes::start(std::uint64_t iterations)
{
    ticks_.clear();
    ticks_.reserve(iterations + 1);
    seconds_.clear();
    start_ = std::chrono::steady_clock::now();
    ticks_.push_back(now());
}

void IterationTimes::stop()
{
    const double elapsed = duration<double>(steady_clock::now() - start_).count();
    seconds_.clear();
    if (ticks_.size() < 2 || ticks_.back() <= ticks_.front())
        return; // no iterations, or a counter that did not advance: no times
    const double per_tick = elapsed / static_cast<double>(ticks_.back() - ticks_.front());
    seconds_.reserve(ticks_.size() - 1);
    for (std::size_t i = 1; i < ticks_.size(); ++i)
        seconds_.push_back(static_cast<double>(ticks_[i] - ticks_[i - 1]) * per_tick);
}

std::uint64_t IterationTimes::now() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc(); // invariant on the CPUs that run this; scaled by steady_clock above
#elif defined(__aarch64__)
    std::uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return static_cast<std::uint64_t>(steady_clock::now().time_since_epoch().count());
#endif
}

void instrumentation_start() noexcept
{
#ifdef WEFT_HAVE_CALLGRIND
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
#endif
}

void instrumentation_stop() noexcept
{
#ifdef WEFT_HAVE_CALLGRIND
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("timed loop");
#endif
}

} // namespace weft::bench
