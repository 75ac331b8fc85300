// SPDX-License-Identifier: MIT
// Two tools in one run, their timed blocks interleaved (ABBA...): the ratio of
// each adjacent pair, so that a noisy machine's moments hit both alike.
#include <poll.h>

#include <algorithm>
#include <array>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness_parts.hpp"
#include "sizes.hpp"

namespace weft::bench {
namespace {

using namespace parts;

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
        // Latency: every iteration's time too, for the median of them all
        // (ucx_perftest's "typical" is that; its "average" is the mean).
        std::vector<double> each_a, each_b;
        const auto keep_times = [&](End& end, std::vector<double>& into) {
            for (const double t : end.iteration_times())
                into.push_back(t * 1e6 / xfers);
        };
        for (int k = 0; k < blocks; ++k) {
            double ta = 0, tb = 0;
            if (k % 2 == 0) {
                ta = a.round(plan);
                keep_times(a, each_a);
                tb = b.round(plan);
                keep_times(b, each_b);
            } else {
                tb = b.round(plan);
                keep_times(b, each_b);
                ta = a.round(plan);
                keep_times(a, each_a);
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
                             {"a_median_each", each_a.empty() ? 0.0 : quantile(each_a, 0.5)},
                             {"b_median_each", each_b.empty() ? 0.0 : quantile(each_b, 0.5)},
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

} // namespace weft::bench
