// SPDX-License-Identifier: MIT
#include "verbs_devices.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <memory>

#include <infiniband/verbs.h>

#include <fmt/format.h>

namespace weft::providers {
namespace {

std::string_view port_state(ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
    }
}

std::string speed_text(const ibv_port_attr& a)
{
    // Per-lane rate in Gb/s by active_speed code (IB spec encoding).
    double lane = 0;
    std::string_view name = "?";
    switch (a.active_speed) {
    case 1: lane = 2.5; name = "SDR"; break;
    case 2: lane = 5; name = "DDR"; break;
    case 4: case 8: lane = 10; name = a.active_speed == 4 ? "QDR" : "FDR10"; break;
    case 16: lane = 14.0625; name = "FDR"; break;
    case 32: lane = 25.78125; name = "EDR"; break;
    case 64: lane = 50; name = "HDR"; break;
    case 128: lane = 100; name = "NDR"; break;
    default: break;
    }
    int width = 0;
    switch (a.active_width) {
    case 1: width = 1; break;
    case 2: width = 4; break;
    case 4: width = 8; break;
    case 8: width = 12; break;
    case 16: width = 2; break;
    default: break;
    }
    if (lane == 0 || width == 0)
        return fmt::format("unknown (speed code {}, width code {})", a.active_speed,
                           a.active_width);
    return fmt::format("{:g} Gb/s ({}x {})", lane * width, width, name);
}

std::string gid_text(const ibv_gid& g)
{
    std::array<char, INET6_ADDRSTRLEN> buf{};
    inet_ntop(AF_INET6, g.raw, buf.data(), buf.size());
    return buf.data();
}

bool ipv4_mapped(const ibv_gid& g)
{
    static constexpr std::array<std::uint8_t, 12> prefix{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::equal(prefix.begin(), prefix.end(), g.raw);
}

void classify_gids(ibv_context* ctx, const ibv_device_attr& dev, VerbsPort& port)
{
    // Prefer RoCE v2 with an IPv4-mapped GID, then any RoCE v2, then whatever
    // comes first (libfabric#6365: every device looked alike at GID index 0).
    std::vector<ibv_gid_entry> table(static_cast<std::size_t>(dev.phys_port_cnt) * 256);
    const ssize_t n = ibv_query_gid_table(ctx, table.data(), table.size(), 0);
    const ibv_gid_entry* best = nullptr;
    int best_score = -1;
    bool any_v2 = false;
    for (ssize_t i = 0; i < n; ++i) {
        const auto& e = table[static_cast<std::size_t>(i)];
        if (e.port_num != port.number)
            continue;
        const bool v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
        any_v2 |= v2;
        const int score = (v2 ? 2 : 0) + (ipv4_mapped(e.gid) ? 1 : 0);
        if (score > best_score) {
            best = &e;
            best_score = score;
        }
    }
    if (best) {
        port.gid_index = static_cast<int>(best->gid_index);
        port.gid = gid_text(best->gid);
        port.gid_type = best->gid_type == IBV_GID_TYPE_ROCE_V2   ? "RoCE v2"
                        : best->gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1"
                                                                 : "IB";
    }
    if (port.kind == LinkKind::unknown)
        port.kind = any_v2 ? LinkKind::roce_v2 : LinkKind::roce_v1;
}

struct DeviceListDeleter {
    void operator()(ibv_device** l) const noexcept { ibv_free_device_list(l); }
};
struct ContextDeleter {
    void operator()(ibv_context* c) const noexcept { ibv_close_device(c); }
};

} // namespace

std::string_view to_string(LinkKind kind) noexcept
{
    switch (kind) {
    case LinkKind::infiniband: return "InfiniBand";
    case LinkKind::roce_v1: return "RoCE v1";
    case LinkKind::roce_v2: return "RoCE v2";
    case LinkKind::iwarp: return "iWARP";
    case LinkKind::unknown: break;
    }
    return "unknown";
}

std::vector<VerbsDevice> verbs_devices()
{
    std::vector<VerbsDevice> out;
    int count = 0;
    std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&count));
    if (!list)
        return out;
    for (int i = 0; i < count; ++i) {
        ibv_device* dev = list.get()[i];
        VerbsDevice d;
        d.name = ibv_get_device_name(dev);
        const bool iwarp = dev->transport_type == IBV_TRANSPORT_IWARP;
        d.transport = iwarp ? "iWARP" : dev->transport_type == IBV_TRANSPORT_IB ? "InfiniBand"
                                                                                 : "other";
        d.node_type = ibv_node_type_str(dev->node_type);
        std::unique_ptr<ibv_context, ContextDeleter> ctx(ibv_open_device(dev));
        ibv_device_attr attr{};
        if (!ctx || ibv_query_device(ctx.get(), &attr) != 0) {
            out.push_back(std::move(d));
            continue;
        }
        d.max_cqe = static_cast<std::size_t>(attr.max_cqe);
        d.max_qp_wr = static_cast<std::size_t>(attr.max_qp_wr);
        d.max_sge_rd = static_cast<std::size_t>(attr.max_sge_rd);
        d.atomics = attr.atomic_cap != IBV_ATOMIC_NONE;
        for (unsigned p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (ibv_query_port(ctx.get(), static_cast<std::uint8_t>(p), &pa) != 0)
                continue;
            VerbsPort port;
            port.number = p;
            port.active = pa.state == IBV_PORT_ACTIVE;
            port.state = port_state(pa.state);
            const bool ib = pa.link_layer == IBV_LINK_LAYER_INFINIBAND ||
                            pa.link_layer == IBV_LINK_LAYER_UNSPECIFIED;
            port.link_layer = ib ? "InfiniBand" : "Ethernet";
            port.active_mtu = 128u << static_cast<unsigned>(pa.active_mtu);
            port.speed = speed_text(pa);
            if (iwarp)
                port.kind = LinkKind::iwarp;
            else if (ib)
                port.kind = LinkKind::infiniband;
            classify_gids(ctx.get(), attr, port);
            d.ports.push_back(std::move(port));
        }
        out.push_back(std::move(d));
    }
    return out;
}

namespace {
const VerbsDevice* find_device(const std::vector<VerbsDevice>& all, std::string_view name)
{
    for (const auto& d : all)
        if (name.substr(0, d.name.size()) == d.name &&
            (name.size() == d.name.size() || name[d.name.size()] == '-'))
            return &d;
    return nullptr;
}
} // namespace

std::optional<VerbsDevice> find_verbs_device(std::string_view domain)
{
    const auto all = verbs_devices();
    if (const auto* d = find_device(all, domain))
        return *d;
    return std::nullopt;
}

} // namespace weft::providers
