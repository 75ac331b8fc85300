// SPDX-License-Identifier: MIT
// verbs's checks for `weft doctor` (weft::provider_checks): the locked-memory
// limit registrations pin against, each device and port, RoCE GIDs, rdma_cm,
// and the iWARP port mapper.
#include <dirent.h>
#include <netdb.h>
#include <sys/resource.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "checks.hpp"
#include "verbs_devices.hpp"

namespace weft::providers {
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


std::vector<Finding> check_devices(const std::vector<VerbsDevice>& devices)
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
                                                 p.number, to_string(p.kind),
                                                 d.transport, p.state, p.active_mtu, p.speed);
            if (!p.active) {
                out.push_back({"rdma devices", Verdict::fail, what,
                               "bring the port up: `ip link set <netdev> up` for RoCE / iWARP, "
                               "a running subnet manager for InfiniBand"});
                continue;
            }
            out.push_back({"rdma devices", Verdict::ok, what, ""});
            if (p.kind == LinkKind::roce_v2 || p.kind == LinkKind::roce_v1) {
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

} // namespace

void verbs_checks(const CheckOptions&, std::vector<Finding>& out)
{
    const auto devices = verbs_devices();
    out.push_back(check_memlock(!devices.empty()));
    for (auto& f : check_devices(devices))
        out.push_back(std::move(f));
    out.push_back(check_rdma_cm(!devices.empty()));
    bool iwarp = false;
    for (const auto& d : devices)
        iwarp |= d.transport == "iWARP";
    if (iwarp)
        // Hardware iWARP reserves its rdma_cm ports through iwpmd; siw opts out
        // of the mapper (IW_F_NO_PORT_MAP). Either way weft retries a port that
        // clashes (src/base/retry.hpp), so a missing mapper is a note, not a fault.
        out.push_back(
            process_running("iwpmd")
                ? Finding{"iwarp port mapper", Verdict::ok,
                          "iwpmd is running (it reserves ports for hardware iWARP; siw opts out)",
                          ""}
                : Finding{"iwarp port mapper", Verdict::note,
                          "an iWARP device is present but iwpmd is not running: rdma_cm may "
                          "pick a port a TCP socket holds (EADDRINUSE); weft retries on another "
                          "port, other rdma_cm users may not",
                          "`systemctl start iwpmd` (rdma-core) for hardware iWARP"});
}

} // namespace weft::providers
