// SPDX-License-Identifier: MIT
// verbs: InfiniBand, RoCE (v1/v2) and iWARP through rdma-core. MSG endpoints are
// the fast path for RMA; RDM goes through ofi_rxm. Device facts come from
// libibverbs: which ports are ACTIVE, whether a device is iWARP, its CQ limit.
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <infiniband/verbs.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "verbs_devices.hpp"

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
    .probe = verbs_probe,
    .error_hint = verbs_hint,
};

void apply_verbs_quirks(const fi_info* info, Quirks& q)
{
    const bool iwarp = info->ep_attr->protocol == FI_PROTO_IWARP ||
                       info->ep_attr->protocol == FI_PROTO_IWARP_RDM ||
                       (info->domain_attr->name && is_iwarp_device(info->domain_attr->name));
    q.read_sink_needs_remote_write = iwarp;
    q.initiator_sends_first = iwarp;
    if (info->domain_attr->name)
        q.max_cq_entries = max_cq_entries(info->domain_attr->name);
}

} // namespace weft::providers
