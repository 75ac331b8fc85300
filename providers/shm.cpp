// SPDX-License-Identifier: MIT
// shm: shared memory between processes of one host. RDM only; requires
// FI_MR_VIRT_ADDR; moves large data with cross-memory attach (process_vm_readv
// and process_vm_writev), which needs ptrace permission over the peer.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "checks.hpp"
#include "check.hpp"
#include "traits.hpp"
#include "weft/base/error.hpp"

namespace weft::providers {
namespace {

std::string shm_hint(int code)
{
    if (code != -FI_EPERM && code != -FI_EACCES && code != -FI_EIO)
        return {};
    std::string scope = "absent (no Yama LSM)";
    int value = 0;
    if (std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
        int v = -1;
        if (std::fscanf(f, "%d", &v) == 1) {
            scope = std::to_string(v);
            value = v;
        }
        std::fclose(f);
    }
    const std::string permission = fmt::format(
        "shm moves data with cross-memory attach (process_vm_readv/writev), which needs "
        "ptrace permission over the peer process; /proc/sys/kernel/yama/ptrace_scope is {}. "
        "Fix: sysctl kernel.yama.ptrace_scope=0, or run with CAP_SYS_PTRACE "
        "(containers: --cap-add SYS_PTRACE), and keep both processes dumpable",
        scope);
    // An I/O error where the permission holds (scope 0, or root under scope 1)
    // is the kernel's copy meeting memory the target does not have.
    const std::string range =
        "the remote range lies outside the memory the target process has mapped: shm checks "
        "no key, access or bounds (QUIRKS.md), so a forged or stale RemoteRegion (a length or "
        "offset beyond what the target registered, or a region it has freed) reaches the "
        "kernel's copy (process_vm_writev/readv), which fails; check the RemoteRegion";
    if (code != -FI_EIO)
        return permission;
    if (value == 0 || (value == 1 && ::geteuid() == 0))
        return range;
    return fmt::format("either {}, or {}", range, permission);
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

// libfabric 1.17's shm takes its region's pthread spin lock in every
// progress call of the endpoint (smr_progress_cmd, _resp, _sar_list) and in
// every peer's RMA into the region (smr_rma_fast), copying inside it. A peer
// killed inside holds it for good (QUIRKS.md), and the owner's next
// fi_cq_read spins forever. The region is /dev/shm/<the name weft gave the
// endpoint>; struct smr_region (include/ofi_shm.h, SMR_VERSION 4) begins
//   u8 version, u8 resv, u16 flags, int pid, u8 cma_cap_peer, u8 cma_cap_self,
//   u32 max_sar_buf_per_peer, void* base_addr, pthread_spinlock_t lock ...
// Only that layout is read, and only where the library is 1.17 and the
// region says version 4 and this pid: a later libfabric (1.18 replaced the
// lock) gets no guard.
constexpr std::size_t region_version_at = 0;
constexpr std::size_t region_pid_at = 4;
constexpr std::size_t region_lock_at = 24;
constexpr std::uint8_t region_version = 4;

/// glibc's word for a free pthread spin lock (1 on x86-64, 0 elsewhere).
int unlocked_value()
{
    pthread_spinlock_t probe;
    pthread_spin_init(&probe, PTHREAD_PROCESS_SHARED);
    const int v = probe; // glibc: a volatile int
    pthread_spin_destroy(&probe);
    return v;
}

std::shared_ptr<const detail::ProgressLock> region_lock(fid_ep* ep)
{
    static_assert(sizeof(pthread_spinlock_t) == sizeof(int));
    if (FI_MAJOR(fi_version()) != 1 || FI_MINOR(fi_version()) != 17)
        return nullptr;
    std::string name(256, '\0');
    std::size_t len = name.size();
    if (fi_getname(&ep->fid, name.data(), &len) != 0 || len == 0 || len > name.size())
        return nullptr;
    name.resize(::strnlen(name.c_str(), len));
    if (name.empty() || name.find('/') != std::string::npos)
        return nullptr;
    const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nullptr;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED)
        return nullptr;
    std::shared_ptr<const void> mapping(p, [page](const void* q) { ::munmap(const_cast<void*>(q), page); });
    const auto* bytes = static_cast<const unsigned char*>(p);
    int pid = 0;
    std::memcpy(&pid, bytes + region_pid_at, sizeof pid);
    if (bytes[region_version_at] != region_version || pid != ::getpid())
        return nullptr;
    static const int unlocked = unlocked_value();
    auto lock = std::make_shared<detail::ProgressLock>();
    lock->word = reinterpret_cast<const volatile int*>(bytes + region_lock_at);
    lock->unlocked = unlocked;
    lock->keep = std::move(mapping);
    return lock;
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
    .progress_lock = region_lock,
    .checks = shm_checks,
};

} // namespace weft::providers
