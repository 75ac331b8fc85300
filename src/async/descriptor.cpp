// SPDX-License-Identifier: MIT
// Descriptor: where a target wants a transfer's blocks, on the wire.
//
// Wire v1, little-endian: "wfDL" u8 version u8 0 u16 0, the RemoteRegion's 40
// bytes, u64 block, u32 count, then count u64 offsets.
#include <rdma/fi_errno.h>

#include <algorithm>

#include <fmt/format.h>

#include "weft/async/task.hpp"
#include "weft/async/transfer.hpp"
#include "weft/base/error.hpp"
#include "wire.hpp"

namespace weft {

namespace {
constexpr std::array<std::byte, 4> magic = {std::byte{'w'}, std::byte{'f'}, std::byte{'D'},
                                            std::byte{'L'}};
constexpr std::uint8_t version = 1;
constexpr std::size_t head = 8 + RemoteRegion::wire_size + 8 + 4;

[[noreturn]] void garbage(const std::string& why)
{
    throw UsageError("Descriptor::decode", -FI_EINVAL, "",
                     fmt::format("not a weft descriptor list: {}", why));
}
} // namespace

std::vector<std::byte> Descriptor::encode() const
{
    std::vector<std::byte> out(head + offsets.size() * 8);
    wire::Placer p(out);
    for (std::byte b : magic)
        p.u8(std::to_integer<std::uint8_t>(b));
    p.u8(version).u8(0).u16(0);
    for (std::byte b : region.encode())
        p.u8(std::to_integer<std::uint8_t>(b));
    p.u64(block).u32(static_cast<std::uint32_t>(offsets.size()));
    for (std::uint64_t o : offsets)
        p.u64(o);
    return out;
}

Descriptor Descriptor::decode(std::span<const std::byte> bytes)
{
    if (bytes.size() < head)
        garbage(fmt::format("{} B, shorter than its {} B header", bytes.size(), head));
    if (!std::equal(magic.begin(), magic.end(), bytes.begin()))
        garbage("its magic is not \"wfDL\"");
    if (std::to_integer<std::uint8_t>(bytes[4]) != version)
        garbage(fmt::format("version {}, this weft reads {}", std::to_integer<int>(bytes[4]), version));
    Descriptor d;
    d.region = RemoteRegion::decode(bytes.subspan(8, RemoteRegion::wire_size));
    const std::byte* q = bytes.data() + 8 + RemoteRegion::wire_size;
    d.block = wire::get_le(q, 8);
    const auto count = static_cast<std::size_t>(wire::get_le(q + 8, 4));
    if (bytes.size() != head + count * 8)
        garbage(fmt::format("{} offsets announced, {} B present", count, bytes.size() - head));
    d.offsets.resize(count);
    for (std::size_t i = 0; i < count; ++i)
        d.offsets[i] = wire::get_le(bytes.data() + head + i * 8, 8);
    for (std::size_t i = 0; i < count; ++i)
        (void)d.region.write_address(d.offsets[i], d.block); // in bounds, or UsageError
    return d;
}

std::vector<TransferEntry> Descriptor::entries(PeerId peer, std::span<const Local> blocks) const
{
    if (blocks.size() != offsets.size())
        throw UsageError("Descriptor::entries", -FI_EINVAL, "",
                         fmt::format("{} local blocks for {} places", blocks.size(), offsets.size()));
    std::vector<TransferEntry> out;
    out.reserve(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (blocks[i].len != block)
            throw UsageError("Descriptor::entries", -FI_EINVAL, "",
                             fmt::format("local block {} is {} B; the target wants {} B blocks",
                                         i, blocks[i].len, block));
        out.push_back({peer, blocks[i], region, offsets[i]});
    }
    return out;
}

Task<> publish(Node& node, PeerId peer, const Descriptor& d, Deadline deadline)
{
    const std::vector<std::byte> bytes = d.encode();
    auto buffer = node.allocate(bytes.size(), Access::local);
    std::copy(bytes.begin(), bytes.end(), buffer->data());
    (void)co_await node.send(peer, buffer->all(), deadline);
}

Task<Descriptor> receive_descriptor(Node& node, PeerId peer, Deadline deadline)
{
    const Completion c = co_await node.message(peer, deadline);
    co_return Descriptor::decode(c.message);
}

} // namespace weft
