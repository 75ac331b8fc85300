// SPDX-License-Identifier: MIT
// verbs: InfiniBand, RoCE (v1/v2) and iWARP through rdma-core. MSG endpoints are
// the fast path for RMA; RDM goes through ofi_rxm. Device facts come from
// libibverbs: which ports are ACTIVE, whether a device is iWARP, its CQ limit.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <infiniband/verbs.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "checks.hpp"
#include "traits.hpp"
#include "verbs_devices.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft::providers {
namespace {

Availability verbs_probe()
{
    const auto devices = verbs_devices();
    if (devices.empty())
        return {false,
                "no RDMA device (libibverbs lists none): load the NIC's driver, or create a "
                "software device (rdma link add rxe0 type rxe netdev IFACE)"};
    std::string down;
    for (const auto& d : devices)
        for (const auto& p : d.ports) {
            if (p.active)
                return {true, fmt::format("{} port {} ACTIVE ({})", d.name, p.number,
                                          to_string(p.kind))};
            down += fmt::format("{}{} port {} {}", down.empty() ? "" : ", ", d.name, p.number,
                                p.state);
        }
    return {false, fmt::format("no RDMA port is ACTIVE ({}): bring the link up", down)};
}

std::string verbs_hint(int code)
{
    if (code == -FI_ENODATA)
        return "libfabric's verbs provider resolves this host's name through rdma_cm: make "
               "sure `hostname` resolves (an /etc/hosts line) to an address on the RDMA "
               "device, and that the device has an IP address";
    if (code == -FI_ENOMEM || code == -FI_EAGAIN || code == -FI_EFAULT)
        return "verbs pins registered memory: check RLIMIT_MEMLOCK (ulimit -l)";
    return {};
}

// ofi_rxm opens each core CQ with (msg tx size + msg rx size) * FI_UNIVERSE_SIZE
// entries, 256 * 256 by default; rxe allows 32767 and fi_enable fails with -22.
// libfabric reads FI_UNIVERSE_SIZE when it initialises, so weft sets it first,
// from the smallest device, unless the user already chose a value.
std::string verbs_prepare()
{
    // libfabric's registration cache shares one registration among requests
    // for the same memory and registers it with every access flag: a peer
    // could then write a region weft exported read-only (rxe and siw). weft
    // registers exactly what it is asked to (and caches in RegistrationCache,
    // where it owns invalidation). Test: "least privilege: a forged descriptor".
    std::string said;
    if (!std::getenv("FI_MR_CACHE_MAX_COUNT")) {
        ::setenv("FI_MR_CACHE_MAX_COUNT", "0", 0);
        said = "FI_MR_CACHE_MAX_COUNT=0 so that each registration has only the access asked for";
    }
    if (std::getenv("FI_UNIVERSE_SIZE"))
        return said;
    std::size_t smallest = 0;
    for (const auto& d : verbs_devices())
        if (d.max_cqe && (smallest == 0 || d.max_cqe < smallest))
            smallest = d.max_cqe;
    constexpr std::size_t rxm_entries_per_peer = 128 + 128;
    constexpr std::size_t rxm_default_universe = 256;
    if (smallest == 0 || smallest >= rxm_entries_per_peer * rxm_default_universe)
        return said;
    const std::size_t universe = std::max<std::size_t>(1, smallest / rxm_entries_per_peer);
    ::setenv("FI_UNIVERSE_SIZE", std::to_string(universe).c_str(), 0);
    return fmt::format("{}{}FI_UNIVERSE_SIZE={} so that ofi_rxm's completion queues fit the "
                       "smallest RDMA device ({} entries)",
                       said, said.empty() ? "" : "; ", universe, smallest);
}

std::string verbs_describe(const fi_info* info)
{
    const std::string_view domain = info->domain_attr->name ? info->domain_attr->name : "";
    for (const auto& d : verbs_devices()) {
        if (domain.substr(0, d.name.size()) != d.name)
            continue;
        std::string out;
        for (const auto& p : d.ports)
            out += fmt::format("{}{} port {}: {} ({}), {}, MTU {}, {}{}", out.empty() ? "" : "; ",
                               d.name, p.number, to_string(p.kind), d.transport, p.state,
                               p.active_mtu, p.speed,
                               p.gid_index >= 0 ? fmt::format(", GID index {} ({}, {})",
                                                              p.gid_index, p.gid_type, p.gid)
                                                : std::string{});
        return out;
    }
    return {};
}

int verbs_numa_node(const fi_info* info)
{
    if (!info->domain_attr->name)
        return -1;
    const auto device = find_verbs_device(info->domain_attr->name);
    if (!device)
        return -1;
    return read_numa_node(fmt::format("/sys/class/infiniband/{}/device/numa_node", device->name));
}

bool is_iwarp(const fi_info* info)
{
    const auto device =
        info->domain_attr->name ? find_verbs_device(info->domain_attr->name) : std::nullopt;
    return info->ep_attr->protocol == FI_PROTO_IWARP ||
           info->ep_attr->protocol == FI_PROTO_IWARP_RDM || (device && device->transport == "iWARP");
}

// ofi_rxm listens on an rdma_cm port from fi_enable. On iWARP, rdma_cm ports
// share the TCP port space, rdma_cm picks one without asking TCP, and the
// device's listening socket fails with EADDRINUSE where a TCP socket holds it
// (the side channels' ports, on siw). libfabric 1.17 leaves an ofi_rxm
// endpoint whose fi_enable failed half torn down (rxm_ep_ctrl: "TODO: cleanup
// all allocated resources on error"), and fi_close on it crashes (siw: SIGSEGV
// in pthread_mutex_lock). So weft asks TCP for a port it does not hold and
// names it in the endpoint's source address: the listener binds it at
// fi_endpoint, where a clash (a race with another socket) fails cleanly and is
// tried again (detail::retry_on_port_clash). Test: "verbs: on iWARP,
// connections survive rdma_cm ports that TCP sockets hold".
int verbs_before_endpoint(fi_info* info)
{
    const std::string_view prov = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
    auto* sa = static_cast<sockaddr*>(info->src_addr);
    if (prov.find(';') == std::string_view::npos || sa == nullptr || !is_iwarp(info) ||
        (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
        return 0;
    auto* port = sa->sa_family == AF_INET ? &reinterpret_cast<sockaddr_in*>(sa)->sin_port
                                          : &reinterpret_cast<sockaddr_in6*>(sa)->sin6_port;
    if (*port != 0)
        return 0; // the caller chose it
    const detail::Fd probe(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe)
        return -errno;
    const int fd = probe.get();
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    int ret = 0;
    if (::bind(fd, sa, static_cast<socklen_t>(info->src_addrlen)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
        ret = -errno;
    if (ret != 0)
        return ret;
    *port = bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port;
    return 0;
}

void verbs_quirks(const fi_info* info, Quirks& q)
{
    const auto device =
        info->domain_attr->name ? find_verbs_device(info->domain_attr->name) : std::nullopt;
    const bool iwarp = is_iwarp(info);
    // iWARP (libfabric#1707, #3521; zrlio/softiwarp#20): the read sink takes
    // remote writes, the initiator speaks first, and a send without a posted
    // receive terminates the connection.
    q.read_sink_needs_remote_write = iwarp;
    q.initiator_sends_first = iwarp;
    q.receiver_not_ready_fatal = iwarp;
    // siw hands the socket to the QP after sending the MPA reply (siw_accept);
    // set on every iWARP device, as no hardware iWARP has been checked ("quirks
    // follow fi_info bits first, then the traits").
    q.first_message_can_stall = iwarp;
    // libfabric 1.17 verbs MSG endpoints put the operand pointers themselves
    // into the atomic work request (compare_add = (uintptr_t)buf).
    q.atomic_operands_by_value = info->ep_attr->type == FI_EP_MSG;
    // soft-iWARP (siw): some small reads crossing a page boundary return
    // wrong bytes, repeatably, while the memory is right. Set on every iWARP
    // device, as no hardware iWARP has been checked.
    q.page_crossing_reads_unreliable = iwarp;
    const std::string_view prov = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
    q.read_only_unenforced = iwarp && prov.find(';') != std::string_view::npos;
    // An iWARP write completes once sent, so a refusal only closes the
    // connection, which ofi_rxm opens again for the next operation: the
    // refusal may be lost as over TCP (siw: in some lab runs, reported in
    // others; rxe reports it on the write's own completion).
    q.refusal_lost_on_reconnect = iwarp && info->ep_attr->type == FI_EP_RDM;
    if (device) {
        q.max_cq_entries = device->max_cqe;
        q.max_read_iov = device->max_sge_rd;
        // libfabric offers FI_ATOMIC on every verbs domain; the device decides.
        q.atomics_unreliable = !device->atomics;
    }
}

} // namespace

const Traits verbs = {
    .name = "verbs",
    .summary = "RDMA: InfiniBand, RoCE and iWARP devices through rdma-core",
    .rank = 10,
    .rdma = true,
    .pins_memory = true,
    .msg_path = "verbs",
    .rdm_path = "verbs;ofi_rxm",
    .preferred = EndpointKind::msg,
    .rma_target_in_software = false,
    .selective_completion = false,
    .probe = verbs_probe,
    .prepare = verbs_prepare,
    .describe = verbs_describe,
    .numa_node = verbs_numa_node,
    .error_hint = verbs_hint,
    .refine_quirks = verbs_quirks,
    .before_endpoint = verbs_before_endpoint,
    .checks = verbs_checks,
};

} // namespace weft::providers
