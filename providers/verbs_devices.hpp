// SPDX-License-Identifier: MIT
/// @brief RDMA devices as libibverbs sees them, classified: InfiniBand, RoCE v1,
/// RoCE v2 or iWARP, with port state, MTU, speed and the GID weft would use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::providers {

enum class LinkKind : std::uint8_t { infiniband, roce_v1, roce_v2, iwarp, unknown };
std::string_view to_string(LinkKind kind) noexcept;

struct VerbsPort {
    unsigned number = 0;
    bool active = false;
    std::string state;      ///< "ACTIVE", "DOWN", ...
    std::string link_layer; ///< "InfiniBand" or "Ethernet"
    LinkKind kind = LinkKind::unknown;
    unsigned active_mtu = 0;  ///< bytes
    std::string speed;        ///< "2.5 Gb/s x1 (SDR)" style text
    int gid_index = -1;       ///< the GID weft prefers (RoCE v2, IPv4-mapped first)
    std::string gid;          ///< that GID as text
    std::string gid_type;     ///< "IB", "RoCE v1", "RoCE v2"
};

struct VerbsDevice {
    std::string name;        ///< "rxe0", "siw0", "mlx5_0"
    std::string transport;   ///< "InfiniBand" or "iWARP"
    std::string node_type;   ///< "CA", "RNIC", ...
    std::size_t max_cqe = 0; ///< largest completion queue the device allows
    std::size_t max_qp_wr = 0;
    std::size_t max_sge_rd = 0; ///< local segments an RDMA read may scatter into
    bool atomics = false;    ///< device advertises remote atomics
    std::vector<VerbsPort> ports;
};

/// Every device libibverbs lists; empty when there is none (or no libibverbs driver).
std::vector<VerbsDevice> verbs_devices();

/// The device behind a libfabric domain name (suffixes like "-dgram" ignored).
std::optional<VerbsDevice> find_verbs_device(std::string_view domain);

} // namespace weft::providers
