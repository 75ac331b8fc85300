// SPDX-License-Identifier: MIT
/// @brief CPUs for the busy-polling ends of weft's tools (`weft pingpong`,
/// `weft bench`): pinning each end to its own CPU, and a warning when the ends
/// and the machine's other load want more CPUs than this process may use.
///
/// Both ends of a ping-pong poll without sleeping: when they must share a CPU
/// with each other or with other work, each waits for the scheduler to run the
/// other, and a latency run measures time slices (QUIRKS.md has an 8 B tcp
/// ping-pong both ways). Header-only, shared like sizes.hpp. Tested by the
/// "tools: cpus: ..." test cases.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace weft::tool {

/// The CPUs this process may run on (sched_getaffinity: taskset, cgroup
/// cpusets), lowest first.
inline std::vector<int> allowed_cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> out;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
            out.push_back(c);
    return out;
}

/// The 1-minute load average (/proc/loadavg): the machine's runnable tasks.
inline std::optional<double> load_average()
{
    std::ifstream f("/proc/loadavg");
    double load = 0;
    if (f >> load)
        return load;
    return std::nullopt;
}

/// The warning for `pollers` busy-polling ends on `cpus` CPUs of the `online`
/// ones, with the machine's 1-minute load average `load` (measured before the
/// ends start, so it is other work); empty when the ends have their CPUs. The
/// other work counts in proportion to the share of CPUs this process may use;
/// up to half a CPU of it is tolerated.
inline std::string oversubscription(int pollers, int cpus, int online, double load)
{
    if (pollers <= 0 || cpus <= 0)
        return {};
    const double share = online > cpus ? static_cast<double>(cpus) / online : 1.0;
    const double other = load * share;
    if (pollers <= cpus && pollers + other <= cpus + 0.5)
        return {};
    if (pollers > cpus)
        return fmt::format("warning: {} busy-polling ends and {} CPU{} this process may use: "
                           "each end waits for the other's time slice, so the latencies will be "
                           "the scheduler's (give it more CPUs: taskset)",
                           pollers, cpus, cpus == 1 ? "" : "s");
    return fmt::format("warning: {} busy-polling end{} on {} CPUs with a load average of {:.2f}: "
                       "the ends wait for time slices, so the latencies will be the "
                       "scheduler's (run on an idle machine{})",
                       pollers, pollers == 1 ? "" : "s", cpus, load,
                       pollers > 1 ? ", or with --pin" : "");
}

/// Prints the warning for this machine, if any, as one line on stderr.
inline void warn_if_oversubscribed(const char* tool, int pollers)
{
    const auto cpus = static_cast<int>(allowed_cpus().size());
    const auto online = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    const std::string w = oversubscription(pollers, cpus, online, load_average().value_or(0));
    if (!w.empty())
        std::fprintf(stderr, "%s: %s\n", tool, w.c_str());
}

/// Pins the calling thread (and the threads it starts later) to `cpu`.
/// Returns why it could not, or "".
inline std::string pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        return fmt::format("could not pin to CPU {}: {}", cpu, std::strerror(errno));
    return {};
}

/// The CPUs of the two ends of a run on this machine (--pin): the first two this
/// process may use.
struct CpuPair {
    int server = 0;
    int client = 0;
};

/// The pair, or why there is none: a message for stderr.
struct PinPlan {
    std::optional<CpuPair> cpus;
    std::string why_not;
};
inline PinPlan plan_pinning()
{
    const auto cpus = allowed_cpus();
    if (cpus.size() < 2)
        return {std::nullopt, fmt::format("--pin needs two CPUs and this process may use {} "
                                          "(taskset, cpuset): the ends are not pinned",
                                          cpus.size())};
    return {CpuPair{cpus[0], cpus[1]}, {}};
}

/// plan_pinning's pair; when there is none, `who` says why on stderr.
inline std::optional<CpuPair> pinned_pair(const char* who)
{
    const PinPlan plan = plan_pinning();
    if (!plan.cpus)
        std::fprintf(stderr, "%s: %s\n", who, plan.why_not.c_str());
    return plan.cpus;
}

} // namespace weft::tool
