// SPDX-License-Identifier: MIT
#include "weft/fabric/remote_region.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "wire.hpp"

namespace weft {
namespace {

constexpr std::array<std::byte, 4> magic = {std::byte{'W'}, std::byte{'F'}, std::byte{'R'},
                                            std::byte{'R'}};

[[noreturn]] void bad(const std::string& why)
{
    throw UsageError("RemoteRegion::decode", -FI_EINVAL, "",
                     "RemoteRegion descriptor rejected: " + why +
                         ". It must be the 40 bytes produced by RemoteRegion::encode() on the "
                         "peer, passed unchanged");
}

} // namespace

void RemoteRegion::reject(const char* op, std::uint64_t offset, std::size_t len) const
{
    if (empty())
        throw UsageError(std::string("remote ") + op, -FI_EINVAL, "",
                         fmt::format("remote {} through the empty RemoteRegion (no region: its "
                                     "owner exposed none, e.g. a rank that gave RemoteRegion{{}} "
                                     "to all_gather); nothing was posted",
                                     op));
    const bool allowed = std::string_view(op) == "write" ? is_writable() : is_readable();
    if (!allowed)
        throw UsageError(std::string("remote ") + op, -FI_EACCES, "",
                         fmt::format("remote {} refused before posting: the region ({} B, key "
                                     "{:#x}) was exported without remote-{} access; register it "
                                     "with Access::remote_{} on the target",
                                     op, length_, key_, op, op));
    throw UsageError(std::string("remote ") + op, -FI_EINVAL, "",
                     fmt::format("remote {} of {} B at offset {} is out of bounds of the {} B "
                                 "region (key {:#x}); nothing was posted",
                                 op, len, offset, length_, key_));
}

std::uint64_t RemoteRegion::atomic_address(std::uint64_t offset) const
{
    if (!is_writable())
        reject("write", offset, 8);
    const std::uint64_t addr = read_address(offset, 8);
    if (addr % 8 != 0)
        throw UsageError("remote atomic", -FI_EINVAL, "",
                         fmt::format("remote atomic at offset {} is not 8-byte aligned "
                                     "(address {:#x}); 64-bit atomics need aligned targets",
                                     offset, addr));
    return addr;
}

RemoteRegion::Wire RemoteRegion::encode() const noexcept
{
    Wire w{};
    wire::Placer out(w);
    out.raw(magic).u8(wire_version).u8(flags_).u16(0).u64(base_).u64(length_).u64(key_);
    out.u32(crc32c(std::span(w).first(out.size()))).u32(0);
    return w;
}

RemoteRegion RemoteRegion::decode(std::span<const std::byte> b)
{
    if (b.size() != wire_size)
        bad(fmt::format("{} bytes, expected {}", b.size(), wire_size));
    wire::Reader in(b, "RemoteRegion"); // its size checked: no read runs short
    if (!std::ranges::equal(in.raw(magic.size()), magic))
        bad("bad magic (not a weft RemoteRegion)");
    const std::uint8_t version = in.u8();
    if (version != wire_version)
        bad(fmt::format("wire version {} but this weft reads version {} (upgrade the older side)",
                        version, wire_version));
    const std::uint8_t flags = in.u8();
    if (flags & ~(readable | writable | virt_addr))
        bad(fmt::format("unknown flag bits {:#x}", flags));
    const std::uint16_t reserved = in.u16();
    const std::uint64_t base = in.u64();
    const std::uint64_t length = in.u64();
    const std::uint64_t key = in.u64();
    const std::uint32_t crc = in.u32();
    if (reserved != 0 || in.u32() != 0)
        bad("reserved bytes are not zero");
    if (crc != crc32c(b.first(32)))
        bad("checksum mismatch (corrupted in transit?)");
    if (length == 0) {
        if (base != 0 || key != 0 || flags != 0)
            bad("zero length"); // only the empty descriptor has no length
        return RemoteRegion{};
    }
    if (base + length < base)
        bad("base + length overflows 64 bits");
    return RemoteRegion(base, length, key, flags);
}

} // namespace weft
