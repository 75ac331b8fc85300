// SPDX-License-Identifier: MIT
// The patterns: names, default sweeps, the plan a client sends per round, the
// iteration timer and the callgrind markers.
#include <cstring>
#include <stdexcept>

#include "harness_parts.hpp"
#include "wire.hpp"

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

using namespace std::chrono;

constexpr std::pair<Pattern, std::string_view> names[] = {
    {Pattern::lat_write, "lat-write"}, {Pattern::lat_read, "lat-read"},
    {Pattern::lat_notify, "lat-notify"}, {Pattern::bw_write, "bw-write"},
    {Pattern::bw_read, "bw-read"},     {Pattern::bw_notify, "bw-notify"},
    {Pattern::rate, "rate"},           {Pattern::iops, "iops"},
    {Pattern::cpu_write, "cpu-write"}, {Pattern::reg_cache, "reg-cache"},
    {Pattern::pool, "pool"},
};

} // namespace

namespace parts {

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

int busy_ends(Pattern p)
{
    return p == Pattern::lat_write || p == Pattern::lat_notify || p == Pattern::bw_notify ? 2 : 1;
}

int transfers_per_iteration(Pattern p)
{
    return p == Pattern::lat_write || p == Pattern::lat_notify ? 2 : 1;
}

} // namespace parts

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
    wire::Writer w;
    w.u64(static_cast<std::uint64_t>(plan.pattern));
    w.u64(plan.size);
    w.u64(plan.iterations);
    w.u64(plan.queue_depth);
    side.send(w.data(), deadline);
}

Plan receive_plan(SideChannel& side, Deadline deadline)
{
    const auto b = side.receive(deadline);
    wire::Reader r(b, "benchmark plan", "weft bench");
    const auto pattern = r.u64();
    if (pattern > static_cast<std::uint64_t>(Pattern::pool))
        throw std::runtime_error("the benchmark client asked for an unknown pattern: it is not "
                                 "this version of the benchmark");
    const Plan plan{static_cast<Pattern>(pattern), r.u64(), r.u64(), r.u64()};
    r.finish();
    return plan;
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
