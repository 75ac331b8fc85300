// SPDX-License-Identifier: MIT
// shm: shared memory between processes of one host. RDM only; requires
// FI_MR_VIRT_ADDR; moves large data with cross-memory attach (process_vm_readv
// and process_vm_writev), which needs ptrace permission over the peer.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <string>

#include <dirent.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "checks.hpp"
#include "check.hpp"
#include "traits.hpp"
#include "weft/error.hpp"

namespace weft::providers {
namespace {

std::string shm_hint(int code)
{
    if (code != -FI_EPERM && code != -FI_EACCES && code != -FI_EIO)
        return {};
    std::string scope = "absent (no Yama LSM)";
    if (std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
        int v = -1;
        if (std::fscanf(f, "%d", &v) == 1)
            scope = std::to_string(v);
        std::fclose(f);
    }
    return fmt::format(
        "shm moves data with cross-memory attach (process_vm_readv/writev), which needs "
        "ptrace permission over the peer process; /proc/sys/kernel/yama/ptrace_scope is {}. "
        "Fix: sysctl kernel.yama.ptrace_scope=0, or run with CAP_SYS_PTRACE "
        "(containers: --cap-add SYS_PTRACE), and keep both processes dumpable",
        scope);
}

// libfabric 1.17 names an shm endpoint's region /dev/shm/PID:DOMAIN:EP and
// leaves it there when the process is killed (16 MiB each); a later process
// that is given the same PID then fails fi_enable with -FI_EBUSY (PIDs wrap;
// QUIRKS.md has the host's limit). weft names its regions
// weft.NS.PID.START.N instead (NS: the PID namespace, START: the process's
// start time in clock ticks since boot), a name no other process can have
// had, and removes the regions of weft processes that are gone ("faults: shm
// regions of killed processes are swept").

std::string self_namespace()
{
    std::string link(64, '\0');
    const ssize_t n = ::readlink("/proc/self/ns/pid", link.data(), link.size());
    if (n <= 0)
        return "0";
    link.resize(static_cast<std::size_t>(n)); // "pid:[4026531836]"
    const auto open = link.find('['), close = link.find(']');
    return open != std::string::npos && close > open ? link.substr(open + 1, close - open - 1) : "0";
}

/// Field 22 of /proc/PID/stat (start time since boot, in clock ticks); 0 when
/// there is no such process, -1 when it cannot be told (no /proc, hidepid).
std::int64_t start_time(long pid)
{
    std::FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (!f)
        return errno == ENOENT ? 0 : -1;
    std::string stat(1024, '\0');
    stat.resize(std::fread(stat.data(), 1, stat.size(), f));
    std::fclose(f);
    // The command name (field 2) may hold spaces: count fields after its ')'.
    std::size_t at = stat.rfind(')');
    for (int field = 2; at != std::string::npos && field < 22; ++field)
        at = stat.find(' ', at + 1);
    return at == std::string::npos ? -1 : std::strtoll(stat.c_str() + at + 1, nullptr, 10);
}

/// Removes /dev/shm/weft.NS.PID.START.* of this namespace whose process is gone.
void sweep(const std::string& ns)
{
    DIR* dir = ::opendir("/dev/shm");
    if (!dir)
        return;
    const std::string prefix = "weft." + ns + ".";
    int removed = 0;
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name.rfind(prefix, 0) != 0)
            continue;
        long pid = 0;
        long long start = 0;
        if (std::sscanf(name.c_str() + prefix.size(), "%ld.%lld.", &pid, &start) != 2)
            continue;
        // Gone: no such process, or another one that was given its PID.
        const std::int64_t now = start_time(pid);
        if (now >= 0 && now != start && ::unlink(("/dev/shm/" + name).c_str()) == 0)
            ++removed;
    }
    ::closedir(dir);
    if (removed)
        weft::detail::log_warning(fmt::format(
            "removed {} shm region(s) that killed weft processes left in /dev/shm", removed));
}

int name_region(fid_ep* ep)
{
    static const std::string ns = self_namespace();
    static std::atomic<std::uint64_t> next{0};
    sweep(ns); // a region costs 16 MiB: long-lived servers outlive their clients
    const long pid = ::getpid(); // per call: a forked child names its own
    const std::string name =
        fmt::format("weft.{}.{}.{}.{}", ns, pid, start_time(pid), next.fetch_add(1));
    return fi_setname(&ep->fid, const_cast<char*>(name.c_str()), name.size() + 1);
}

} // namespace

const Traits shm = {
    .name = "shm",
    .summary = "shared memory between processes on one host",
    .rank = 5, // first when the caller says both peers share this host
    .same_host_only = true,
    .ip_addressing = false,
    .msg_path = "",
    .rdm_path = "shm",
    .preferred = EndpointKind::rdm,
    // Its fast RMA path (cross-memory attach) never asks the target, so the
    // key is not checked.
    .keys_unchecked = true,
    .dead_peer_blocks_endpoint = true,
    .dead_peer_can_hang_calls = true,
    // A write with CQ data up to 4 KiB is queued for the target and completes
    // at once; a read without CQ data is done by this side itself (cross-memory
    // attach) and does not wait for that queue (smr_generic_rma in 1.17).
    .reads_overtake_queued_writes = true,
    // Cross-memory attach by the initiator only for one remote range; more go
    // through the target's command queue (smr_generic_rma: rma_count == 1).
    .ranges_wait_for_target = true,
    .error_hint = shm_hint,
    .before_enable = name_region,
    .checks = shm_checks,
};

} // namespace weft::providers
