// SPDX-License-Identifier: MIT
#include "weft/peers/node_address.hpp"

#include <algorithm>
#include <array>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/fabric/remote_region.hpp"
#include "wire.hpp"

namespace weft {
namespace {

constexpr std::array<std::byte, 4> magic = {std::byte{'W'}, std::byte{'F'}, std::byte{'N'},
                                            std::byte{'A'}};

[[noreturn]] void bad(const std::string& why)
{
    throw UsageError("NodeAddress::decode", -FI_EINVAL, "",
                     "Node address rejected: " + why +
                         ". It must be the bytes of NodeAddress::encode() on the peer, passed "
                         "unchanged");
}

bool printable(std::string_view s)
{
    return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
}

} // namespace

NodeAddress::NodeAddress(EndpointKind kind, std::string provider, std::uint32_t addr_format,
                         std::uint64_t instance, std::vector<std::byte> fabric_address,
                         std::optional<SameHost> same_host)
    : kind_(kind), provider_(std::move(provider)), addr_format_(addr_format), instance_(instance),
      fabric_address_(std::move(fabric_address)), same_host_(std::move(same_host))
{
    if (same_host_ && (same_host_->lane.empty() || same_host_->lane.size() > max_lane_name ||
                       !printable(same_host_->lane)))
        throw UsageError("NodeAddress", -FI_EINVAL, provider_,
                         fmt::format("the lane's name must be 1 to {} printable characters",
                                     max_lane_name));
    if (provider_.empty() || provider_.size() > max_provider || !printable(provider_))
        throw UsageError("NodeAddress", -FI_EINVAL, provider_,
                         fmt::format("the provider name must be 1 to {} printable characters",
                                     max_provider));
    if (fabric_address_.empty() || fabric_address_.size() > max_fabric_address)
        throw UsageError("NodeAddress", -FI_EINVAL, provider_,
                         fmt::format("a {} B fabric address: it must hold 1 to {} bytes",
                                     fabric_address_.size(), max_fabric_address));
}

std::vector<std::byte> NodeAddress::encode() const
{
    wire::Writer w;
    w.raw(magic);
    w.u8(same_host_ ? 2 : 1);
    w.u8(kind_ == EndpointKind::msg ? 0 : 1);
    w.u16(0);
    w.u32(addr_format_);
    w.u64(instance_);
    w.str(provider_);
    w.bytes(fabric_address_);
    if (same_host_) {
        w.raw(same_host_->boot_id);
        w.u64(same_host_->net_ns);
        w.u64(same_host_->pid_ns);
        w.u32(same_host_->pid);
        w.u32(same_host_->uid);
        w.str(same_host_->lane);
    }
    w.u32(crc32c(w.data()));
    return w.data();
}

NodeAddress NodeAddress::decode(std::span<const std::byte> in)
{
    constexpr std::size_t least = 28 + 1 + 1 + 4;
    if (in.size() < least)
        bad(fmt::format("{} B is shorter than the smallest address ({} B)", in.size(), least));
    if (!std::equal(magic.begin(), magic.end(), in.begin()))
        bad("the magic is not 'WFNA'");
    const auto body = in.first(in.size() - 4);
    if (wire::get_le(in.last(4).data(), 4) != crc32c(body))
        bad("the checksum does not match (corrupted, truncated or padded in transit)");
    try {
        return parse(body.subspan(4));
    } catch (const UsageError&) {
        throw;
    } catch (const Error&) { // wire::Reader: a length runs past the end
        bad("its field lengths do not add up to its size (truncated, or not a Node address)");
    }
}

NodeAddress NodeAddress::parse(std::span<const std::byte> body)
{
    wire::Reader r(body, "Node address");
    const auto version = r.u8();
    if (version < 1 || version > wire_version)
        bad(fmt::format("version {} is not one this weft reads (1 to {}): run the same weft on "
                        "both sides",
                        version, wire_version));
    const std::uint8_t kind = r.u8();
    if (kind > 1)
        bad(fmt::format("endpoint kind {} is neither MSG (0) nor RDM (1)", kind));
    if (r.u8() != 0 || r.u8() != 0)
        bad("the reserved bytes are not 0");
    const std::uint32_t addr_format = r.u32();
    const std::uint64_t instance = r.u64();
    std::string provider = r.str();
    if (provider.empty() || provider.size() > max_provider || !printable(provider))
        bad(fmt::format("the provider name ({} B) is not 1 to {} printable characters",
                        provider.size(), max_provider));
    std::vector<std::byte> address = r.bytes();
    if (address.empty() || address.size() > max_fabric_address)
        bad(fmt::format("the fabric address holds {} B (1 to {} allowed)", address.size(),
                        max_fabric_address));
    std::optional<SameHost> same_host;
    if (version == 2) {
        SameHost h;
        const auto boot = r.raw(h.boot_id.size());
        std::copy(boot.begin(), boot.end(), h.boot_id.begin());
        h.net_ns = r.u64();
        h.pid_ns = r.u64();
        h.pid = r.u32();
        h.uid = r.u32();
        h.lane = r.str();
        if (h.lane.empty() || h.lane.size() > max_lane_name || !printable(h.lane))
            bad(fmt::format("the lane's name ({} B) is not 1 to {} printable characters",
                            h.lane.size(), max_lane_name));
        same_host = std::move(h);
    }
    r.finish();
    return NodeAddress(kind == 0 ? EndpointKind::msg : EndpointKind::rdm, std::move(provider),
                       addr_format, instance, std::move(address), std::move(same_host));
}

} // namespace weft
