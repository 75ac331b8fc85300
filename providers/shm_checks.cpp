// SPDX-License-Identifier: MIT
// shm's checks for `weft doctor` (weft::provider_checks): cross-process copies,
// which need ptrace permission, and room in /dev/shm.
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "checks.hpp"
#include "child.hpp"

namespace weft::providers {
namespace {

bool has_cap_sys_ptrace()
{
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("CapEff:", 0) == 0)
            return (std::stoull(line.substr(7), nullptr, 16) >> 19) & 1; // CAP_SYS_PTRACE = 19
    return false;
}

/// Can this process read another's memory with process_vm_readv, as shm does?
int cma_probe(pid_t target, const void* where)
{
    char byte = 0;
    iovec local{&byte, 1};
    iovec remote{const_cast<void*>(where), 1};
    return process_vm_readv(target, &local, 1, &remote, 1, 0) == 1 ? 0 : errno;
}

Finding check_ptrace(int shm_peer)
{
    const std::string scope_text = read_first_line("/proc/sys/kernel/yama/ptrace_scope");
    const int scope = scope_text.empty() ? -1 : std::stoi(scope_text);
    const bool cap = has_cap_sys_ptrace();
    const std::string fix = "shm moves data with cross-memory attach, which needs ptrace "
                            "permission: `sysctl kernel.yama.ptrace_scope=0`, or CAP_SYS_PTRACE "
                            "(containers: --cap-add SYS_PTRACE); peers must stay dumpable";
    std::string detail = scope < 0 ? "no Yama LSM (ptrace_scope absent)"
                                   : fmt::format("kernel.yama.ptrace_scope = {}", scope);
    if (cap)
        detail += "; this process has CAP_SYS_PTRACE";

    if (shm_peer > 0) {
        const auto gone = [&](std::string_view what) {
            return Finding{"ptrace/shm", Verdict::fail,
                           fmt::format("the shm peer given, PID {0}: {1}, so cross-memory "
                                       "attach to it was not tried",
                                       shm_peer, what),
                           "give the PID of a running shm peer (`pgrep -f NAME`), or none to "
                           "probe two sibling processes"};
        };
        // kill(0) tells a PID that names no process (ESRCH) from one that is
        // not this user's (EPERM): only the second is a matter of permission.
        if (kill(shm_peer, 0) != 0 && errno == ESRCH)
            return gone(fmt::format("there is no process with PID {}", shm_peer));
        // Read one byte of its first mapping, as shm would read its buffers.
        int err = 0;
        std::uintptr_t addr = 0;
        if (std::FILE* maps = std::fopen(fmt::format("/proc/{}/maps", shm_peer).c_str(), "r")) {
            unsigned long long start = 0;
            if (std::fscanf(maps, "%llx-", &start) == 1)
                addr = static_cast<std::uintptr_t>(start);
            const int read_error = std::ferror(maps) ? errno : 0;
            std::fclose(maps);
            if (read_error)
                err = read_error == EACCES ? EPERM : read_error;
            else if (!addr)
                return gone(fmt::format("process {} has no memory (a zombie or a kernel thread)",
                                        shm_peer));
            else
                err = cma_probe(shm_peer, reinterpret_cast<const void*>(addr));
        } else {
            err = errno == EACCES ? EPERM : errno; // its maps are as private as its memory
        }
        if (err == ESRCH || err == ENOENT)
            return gone(fmt::format("process {} exited while it was checked", shm_peer));
        if (err)
            return {"ptrace/shm", Verdict::fail,
                    fmt::format("{}; cross-memory attach to process {} fails: {}", detail,
                                shm_peer, std::strerror(err)),
                    fix};
        return {"ptrace/shm", Verdict::ok,
                fmt::format("{}; cross-memory attach to process {} works", detail, shm_peer), ""};
    }

    // Two sibling processes, as two unrelated shm peers are: the second reads
    // the first's memory.
    static const char probe_byte = 'w';
    int err = EIO;
    try {
        auto a = weft::detail::Child::fork([](int to_parent) {
            (void)!write(to_parent, "r", 1);
            pause();
            return 0;
        });
        char ready = 0;
        if (!a.read_exact(&ready, 1, Deadline::after(std::chrono::seconds(10))))
            throw std::runtime_error("the first process did not start");
        auto b = weft::detail::Child::fork([target = a.pid()](int to_parent) {
            const int e = cma_probe(target, &probe_byte);
            (void)!write(to_parent, &e, sizeof e);
            return 0;
        });
        if (!b.read_exact(&err, sizeof err, Deadline::after(std::chrono::seconds(10))))
            err = EIO;
    } catch (const std::exception& e) {
        return {"ptrace/shm", Verdict::warn,
                fmt::format("{}; could not probe: {}", detail, e.what()), ""};
    }
    if (err)
        return {"ptrace/shm", Verdict::fail,
                fmt::format("{}; cross-memory attach between two sibling processes fails: {}",
                            detail, std::strerror(err)),
                fix};
    return {"ptrace/shm", scope == 1 ? Verdict::warn : Verdict::ok,
            detail + "; cross-memory attach between sibling processes works",
            scope == 1 ? "ptrace_scope 1 allows only descendants: keep shm peers related, or "
                         "set it to 0"
                       : ""};
}

Finding check_dev_shm()
{
    struct statvfs s{};
    if (statvfs("/dev/shm", &s) != 0 || access("/dev/shm", W_OK) != 0)
        return {"/dev/shm", Verdict::warn, "/dev/shm is missing or not writable: shm cannot run",
                "mount a tmpfs on /dev/shm (containers: --shm-size=1g)"};
    const auto free_mib = static_cast<unsigned long long>(s.f_bavail) * s.f_frsize >> 20;
    if (free_mib < 64)
        return {"/dev/shm", Verdict::warn,
                fmt::format("/dev/shm has {} MiB free: shm's regions may not fit", free_mib),
                "enlarge it (containers: --shm-size=1g)"};
    return {"/dev/shm", Verdict::ok, fmt::format("/dev/shm writable, {} MiB free", free_mib), ""};
}

} // namespace

void shm_checks(const CheckOptions& options, std::vector<Finding>& out)
{
    out.push_back(check_ptrace(options.shm_peer));
    out.push_back(check_dev_shm());
}

} // namespace weft::providers
