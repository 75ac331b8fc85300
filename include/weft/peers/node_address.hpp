// SPDX-License-Identifier: MIT
/// @brief What a peer needs to reach a Node: its provider, endpoint kind and
/// fabric address, with a documented, versioned, checksummed wire format.
///
/// Wire format v1 (every integer little-endian):
///
///   offset   size  field
///   0        4     magic "WFNA"
///   4        1     version (1)
///   5        1     endpoint kind: 0 MSG, 1 RDM
///   6        2     reserved, 0
///   8        4     address format (libfabric's FI_SOCKADDR_IN, FI_ADDR_STR, ...)
///   12       8     instance: random, so a Node restarted at the same address differs
///   20       4     P, the provider name's length (1..64)
///   24       P     provider name as fi_getinfo reports it ("tcp;ofi_rxm"), printable ASCII
///   24+P     4     A, the fabric address's length (1..1024)
///   28+P     A     fabric address (fi_getname of the Node's RDM endpoint or MSG listener)
///   28+P+A   4     CRC-32C of every byte before it
///
/// Version 2 (a Node whose same-host lane is on) adds, before the checksum:
///
///   16  boot id (/proc/sys/kernel/random/boot_id)
///   8   network namespace (inode of /proc/self/ns/net)
///   8   pid namespace (inode of /proc/self/ns/pid)
///   4   pid
///   4   uid (effective)
///   4   N, the lane listener's name's length (1..64), then N bytes: its abstract
///       AF_UNIX name, printable ASCII
///
/// A Node without the lane still writes version 1.
/// decode() validates every field and names the first defect; a newer weft
/// may bump the version, and decode() rejects versions it does not know.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/info/info.hpp"

namespace weft {

class NodeAddress {
public:
    static constexpr std::uint8_t wire_version = 2; ///< the newest this weft writes and reads
    static constexpr std::size_t max_lane_name = 64;

    /// Where a co-located peer finds the Node's same-host lane (wire version 2).
    struct SameHost {
        std::array<std::byte, 16> boot_id{};
        std::uint64_t net_ns = 0;
        std::uint64_t pid_ns = 0;
        std::uint32_t pid = 0;
        std::uint32_t uid = 0;
        std::string lane; ///< the lane listener's abstract AF_UNIX name
        friend bool operator==(const SameHost&, const SameHost&) = default;
    };
    static constexpr std::size_t max_provider = 64;
    static constexpr std::size_t max_fabric_address = 1024;

    /// Throws UsageError when a field is out of its range.
    NodeAddress(EndpointKind kind, std::string provider, std::uint32_t addr_format,
                std::uint64_t instance, std::vector<std::byte> fabric_address,
                std::optional<SameHost> same_host = std::nullopt);

    EndpointKind kind() const noexcept { return kind_; }
    const std::string& provider() const noexcept { return provider_; }
    std::uint32_t addr_format() const noexcept { return addr_format_; }
    std::uint64_t instance() const noexcept { return instance_; }
    std::span<const std::byte> fabric_address() const noexcept { return fabric_address_; }
    /// Its same-host lane, when it has one.
    const std::optional<SameHost>& same_host() const noexcept { return same_host_; }

    std::vector<std::byte> encode() const;
    /// Validates magic, version, kind, reserved bytes, lengths, the provider
    /// name and the checksum; throws UsageError naming the first defect.
    static NodeAddress decode(std::span<const std::byte> bytes);

    friend bool operator==(const NodeAddress&, const NodeAddress&) = default;

private:
    static NodeAddress parse(std::span<const std::byte> body); // after magic and checksum

    EndpointKind kind_;
    std::string provider_;
    std::uint32_t addr_format_;
    std::uint64_t instance_;
    std::vector<std::byte> fabric_address_;
    std::optional<SameHost> same_host_;
};

} // namespace weft
