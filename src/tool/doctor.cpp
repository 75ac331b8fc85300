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

#include "verbs_devices.hpp"
#include "doctor_checks.hpp"
#include "info.hpp"
#include "weft/weft.hpp"

namespace weft::tool {

using namespace doctor_checks;

namespace {

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
    if (options.ranks > 0) {
        findings.push_back(check_open_files(options.ranks));
        findings.push_back(check_universe(options.ranks));
    }
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
