// SPDX-License-Identifier: MIT
// `weft doctor`: each check says what it found, a verdict, and the exact fix.
// The providers supply their own checks (weft::provider_checks); here are the
// machine's interfaces, a group's needs and the verdict on the providers.
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "doctor_checks.hpp"
#include "info.hpp"
#include "weft/weft.hpp"

namespace weft::tool {

using namespace doctor_checks;

namespace {

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
    std::vector<Finding> findings = provider_checks({.shm_peer = options.shm_peer});
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
                                     {"verdict", to_string(f.verdict)},
                                     {"detail", f.detail},
                                     {"fix", f.fix}});
        std::printf("%s\n", j.dump(2).c_str());
        return status;
    }
    for (const auto& f : findings) {
        std::printf("%-5s %-18s %s\n", std::string(to_string(f.verdict)).c_str(), f.check.c_str(),
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
