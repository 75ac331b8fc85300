// SPDX-License-Identifier: MIT
// `weft doctor --ranks N`: what a process of an N-rank group needs here.
#include <sys/resource.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "doctor_checks.hpp"

namespace weft::tool::doctor_checks {

namespace {

std::string limit_text(rlim_t v)
{
    return v == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{}", v);
}

} // namespace

Finding check_open_files(unsigned ranks)
{
    // A connected peer holds one descriptor on tcp, net and ofi_rxm, and a
    // process keeps others of its own (queues, the store's connection,
    // libraries): 64 of headroom.
    const rlim_t need = rlim_t{ranks} + 64;
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    const std::string now = fmt::format("RLIMIT_NOFILE is {} (soft) / {} (hard); a rank of {} "
                                        "that reaches every other needs about {}",
                                        limit_text(lim.rlim_cur), limit_text(lim.rlim_max), ranks,
                                        need);
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= need)
        return {"open files", Verdict::ok, now, ""};
    const std::string fix = fmt::format("`ulimit -n {}` in the shell (or job script) that starts "
                                        "the ranks; LimitNOFILE= in a systemd unit; `* - nofile "
                                        "{}` in /etc/security/limits.conf",
                                        need, need);
    if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= need)
        return {"open files", Verdict::warn,
                now + ": connections past the soft limit fail with EMFILE", fix};
    return {"open files", Verdict::fail,
            now + ": not even the hard limit allows it; connections past it fail with EMFILE", fix};
}

Finding check_universe(unsigned ranks)
{
    // libfabric sizes ofi_rxm's queues for FI_UNIVERSE_SIZE peers (1024 when
    // unset, src/common.c). measured_safe: the group size past which an
    // ofi_rxm group with it unset overruns its completion queues on the host
    // (QUIRKS.md). Test: "doctor: a group's open-file limit and
    // FI_UNIVERSE_SIZE are checked against its ranks".
    constexpr unsigned libfabric_default = 1024;
    constexpr unsigned measured_safe = 256;
    const char* set = std::getenv("FI_UNIVERSE_SIZE");
    if (set && *set == '\0')
        set = nullptr; // empty: as unset
    unsigned universe = libfabric_default;
    if (set) {
        const std::string_view t = set;
        if (std::from_chars(t.data(), t.data() + t.size(), universe).ec != std::errc{})
            return {"universe size", Verdict::warn,
                    fmt::format("FI_UNIVERSE_SIZE='{}' is not a number: libfabric ignores it", set),
                    fmt::format("export FI_UNIVERSE_SIZE={}", ranks)};
    }
    const std::string now =
        set ? fmt::format("FI_UNIVERSE_SIZE={}", universe)
            : fmt::format("FI_UNIVERSE_SIZE unset (libfabric assumes {})", libfabric_default);
    const std::string fix = fmt::format("export FI_UNIVERSE_SIZE={} for every rank", ranks);
    if (ranks > universe)
        return {"universe size", Verdict::warn,
                fmt::format("{}: below {} ranks; ofi_rxm's queues are sized for fewer peers and "
                            "can overrun",
                            now, ranks),
                fix};
    if (!set && ranks > measured_safe)
        return {"universe size", Verdict::note,
                fmt::format("{}: ofi_rxm groups of more than {} ranks have overrun their "
                            "completion queues without it set (libfabric 1.17)",
                            now, measured_safe),
                fix};
    return {"universe size", Verdict::ok, fmt::format("{}: enough for {} ranks", now, ranks), ""};
}

} // namespace weft::tool::doctor_checks
