// SPDX-License-Identifier: MIT
// `weft doctor`: each check says what it found, a verdict, and the exact fix.
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../../providers/verbs_devices.hpp"
#include "info.hpp"
#include "weft/weft.hpp"

namespace weft::tool {
namespace {

enum class Verdict { ok, note, warn, fail };

std::string_view name(Verdict v)
{
    switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::note: return "note";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "FAIL";
    }
    return "?";
}

struct Finding {
    std::string check;
    Verdict verdict;
    std::string detail;
    std::string fix;
};

std::string kib(rlim_t v)
{
    return v == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", v / 1024);
}

Finding check_memlock(bool rdma_devices)
{
    rlimit lim{};
    getrlimit(RLIMIT_MEMLOCK, &lim);
    constexpr rlim_t enough = rlim_t{64} << 20;
    const std::string now = fmt::format("RLIMIT_MEMLOCK is {} (soft) / {} (hard)",
                                        kib(lim.rlim_cur), kib(lim.rlim_max));
    const std::string fix = "raise it: `ulimit -l unlimited` in the shell that starts the "
                            "program, LimitMEMLOCK=infinity in a systemd unit, or "
                            "`* - memlock unlimited` in /etc/security/limits.conf "
                            "(containers: --ulimit memlock=-1)";
    if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= enough)
        return {"memlock", Verdict::ok,
                now + (lim.rlim_cur < lim.rlim_max ? "; weft raises the soft limit to the hard one"
                                                   : ""),
                ""};
    return {"memlock", rdma_devices ? Verdict::fail : Verdict::warn,
            now + fmt::format(": RDMA devices pin registered memory, so registrations beyond {} "
                              "fail with ENOMEM",
                              kib(lim.rlim_max)),
            fix};
}

std::string read_first_line(const char* path)
{
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
}

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
                           fmt::format("--shm-peer {0}: {1}, so cross-memory attach to it was not "
                                       "tried",
                                       shm_peer, what),
                           "give the PID of a running shm peer (`pgrep -f NAME`), or leave "
                           "--shm-peer out to probe two sibling processes"};
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
    int ready[2];
    if (pipe(ready) != 0)
        return {"ptrace/shm", Verdict::warn, detail + "; could not probe (pipe)", ""};
    static const char probe_byte = 'w';
    const pid_t a = fork();
    if (a == 0) {
        close(ready[0]);
        (void)!write(ready[1], "r", 1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char c;
    (void)!read(ready[0], &c, 1);
    close(ready[0]);
    int result[2];
    if (pipe(result) != 0) {
        kill(a, SIGKILL);
        waitpid(a, nullptr, 0);
        return {"ptrace/shm", Verdict::warn, detail + "; could not probe (pipe)", ""};
    }
    const pid_t b = fork();
    if (b == 0) {
        close(result[0]);
        const int err = cma_probe(a, &probe_byte);
        (void)!write(result[1], &err, sizeof err);
        _exit(0);
    }
    close(result[1]);
    int err = EIO;
    (void)!read(result[0], &err, sizeof err);
    close(result[0]);
    waitpid(b, nullptr, 0);
    kill(a, SIGKILL);
    waitpid(a, nullptr, 0);
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

std::vector<Finding> check_devices(const std::vector<providers::VerbsDevice>& devices)
{
    std::vector<Finding> out;
    if (devices.empty()) {
        out.push_back({"rdma devices", Verdict::warn,
                       "no RDMA device: libibverbs lists none, so weft falls back to tcp",
                       "load the NIC's driver (mlx5_ib, irdma, bnxt_re, ...), or create a "
                       "software device: `rdma link add rxe0 type rxe netdev IFACE` (Soft-RoCE) "
                       "or `rdma link add siw0 type siw netdev IFACE` (soft-iWARP)"});
        return out;
    }
    for (const auto& d : devices)
        for (const auto& p : d.ports) {
            const std::string what = fmt::format("{} port {}: {} ({}), {}, MTU {}, {}", d.name,
                                                 p.number, providers::to_string(p.kind),
                                                 d.transport, p.state, p.active_mtu, p.speed);
            if (!p.active) {
                out.push_back({"rdma devices", Verdict::fail, what,
                               "bring the port up: `ip link set <netdev> up` for RoCE / iWARP, "
                               "a running subnet manager for InfiniBand"});
                continue;
            }
            out.push_back({"rdma devices", Verdict::ok, what, ""});
            if (p.kind == providers::LinkKind::roce_v2 || p.kind == providers::LinkKind::roce_v1) {
                if (p.gid_type == "RoCE v2")
                    out.push_back({"roce gid", Verdict::ok,
                                   fmt::format("{} port {}: RoCE v2 GID at index {} ({})", d.name,
                                               p.number, p.gid_index, p.gid),
                                   ""});
                else
                    out.push_back({"roce gid", Verdict::warn,
                                   fmt::format("{} port {}: no RoCE v2 GID, only {}", d.name,
                                               p.number, p.gid_type.empty() ? "none" : p.gid_type),
                                   "give the netdev an IP address (RoCE v2 GIDs follow it) and "
                                   "check /sys/kernel/config/rdma_cm/<dev>/ports/1/default_roce_mode"});
            }
        }
    return out;
}

Finding check_rdma_cm(bool rdma_devices)
{
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host, nullptr, &hints, &res);
    if (res)
        freeaddrinfo(res);
    if (rc != 0)
        return {"rdma_cm", rdma_devices ? Verdict::fail : Verdict::warn,
                fmt::format("this host's name '{}' does not resolve ({}): libfabric's verbs "
                            "provider asks rdma_cm for it and fi_getinfo fails with -61",
                            host, gai_strerror(rc)),
                fmt::format("add a line `<IP of the RDMA netdev> {}` to /etc/hosts", host)};
    if (rdma_devices && access("/dev/infiniband/rdma_cm", R_OK | W_OK) != 0)
        return {"rdma_cm", Verdict::fail,
                "/dev/infiniband/rdma_cm is missing or not accessible",
                "`modprobe rdma_ucm`, and give the user access to /dev/infiniband"};
    return {"rdma_cm", Verdict::ok, fmt::format("host name '{}' resolves", host), ""};
}

bool process_running(const char* comm)
{
    DIR* d = opendir("/proc");
    if (!d)
        return false;
    bool found = false;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (read_first_line(fmt::format("/proc/{}/comm", e->d_name).c_str()) == comm) {
            found = true;
            break;
        }
    }
    closedir(d);
    return found;
}

std::vector<Finding> check_interfaces()
{
    std::vector<Finding> out;
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) != 0)
        return out;
    std::set<std::string> up_with_ip, confusing;
    for (const ifaddrs* i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
            continue;
        if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)
            continue;
        const std::string n = i->ifa_name;
        if (n == "lo")
            continue;
        up_with_ip.insert(n);
        for (const char* prefix : {"docker", "br-", "virbr", "veth", "cni", "flannel", "podman"})
            if (n.rfind(prefix, 0) == 0)
                confusing.insert(n);
    }
    freeifaddrs(ifs);
    if (up_with_ip.empty())
        out.push_back({"interfaces", Verdict::warn,
                       "only the loopback interface is up: peers on other hosts cannot be reached",
                       "bring up a network interface with an IP address"});
    for (const auto& n : confusing)
        out.push_back({"interfaces", Verdict::warn,
                       fmt::format("{} is up: a container bridge that the tcp provider may pick "
                                   "as its domain (mochi-margo#243, libfabric#7706)",
                                   n),
                       "pin the interface: Options::domain / --domain eth0, or FI_TCP_IFACE"});
    if (out.empty())
        out.push_back({"interfaces", Verdict::ok,
                       fmt::format("up with an address: {}", fmt::join(up_with_ip, ", ")), ""});
    return out;
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

int doctor(const DoctorOptions& options)
{
    const auto devices = providers::verbs_devices();
    std::vector<Finding> findings;
    findings.push_back(check_memlock(!devices.empty()));
    findings.push_back(check_ptrace(options.shm_peer));
    findings.push_back(check_dev_shm());
    for (auto& f : check_devices(devices))
        findings.push_back(std::move(f));
    findings.push_back(check_rdma_cm(!devices.empty()));
    bool iwarp = false;
    for (const auto& d : devices)
        iwarp |= d.transport == "iWARP";
    if (iwarp)
        // Hardware iWARP reserves its rdma_cm ports through iwpmd; siw opts out
        // of the mapper (IW_F_NO_PORT_MAP). Either way weft retries a port that
        // clashes (src/retry.hpp), so a missing mapper is a note, not a fault.
        findings.push_back(
            process_running("iwpmd")
                ? Finding{"iwarp port mapper", Verdict::ok,
                          "iwpmd is running (it reserves ports for hardware iWARP; siw opts out)",
                          ""}
                : Finding{"iwarp port mapper", Verdict::note,
                          "an iWARP device is present but iwpmd is not running: rdma_cm may "
                          "pick a port a TCP socket holds (EADDRINUSE); weft retries on another "
                          "port, other rdma_cm users may not",
                          "`systemctl start iwpmd` (rdma-core) for hardware iWARP"});
    for (auto& f : check_interfaces())
        findings.push_back(std::move(f));
    if (const char* fp = std::getenv("FI_PROVIDER"))
        findings.push_back({"libfabric", Verdict::note,
                            fmt::format("FI_PROVIDER={} limits which providers libfabric loads", fp),
                            ""});

    // The verdict on providers: what weft can actually open here.
    bool rdma = false, any = false;
    std::string usable;
    for (const auto& c : survey(Options{{.allow_shm = true}})) {
        if (!c.usable)
            continue;
        any = true;
        rdma |= c.rdma;
        usable += fmt::format("{}{} {}", usable.empty() ? "" : ", ", c.provider, to_string(c.kind));
    }
    findings.push_back({"providers", rdma ? Verdict::ok : any ? Verdict::warn : Verdict::fail,
                        any ? "usable: " + usable : "no provider is usable",
                        rdma ? "" : "see `weft info` for why each provider is not usable"});
    const int status = rdma ? 0 : any ? 1 : 2;

    if (options.json) {
        nlohmann::json j;
        j["rdma"] = rdma;
        j["exit_status"] = status;
        for (const auto& f : findings)
            j["findings"].push_back({{"check", f.check},
                                     {"verdict", name(f.verdict)},
                                     {"detail", f.detail},
                                     {"fix", f.fix}});
        std::printf("%s\n", j.dump(2).c_str());
        return status;
    }
    for (const auto& f : findings) {
        std::printf("%-5s %-18s %s\n", std::string(name(f.verdict)).c_str(), f.check.c_str(),
                    f.detail.c_str());
        if (!f.fix.empty())
            std::printf("      %-18s fix: %s\n", "", f.fix.c_str());
    }
    std::printf("%s\n", rdma ? "weft can run RDMA here."
                        : any ? "weft cannot run RDMA here; it falls back (exit status 1)."
                              : "weft cannot run here at all (exit status 2).");
    return status;
}

} // namespace weft::tool
