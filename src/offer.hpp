// SPDX-License-Identifier: MIT
// The server's offer on the side channel: {kind, address format, provider,
// fabric, token, fabric address, report}. Input from the network: decode()
// validates every length (wire::Reader) and throws weft::Error on garbage.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/info.hpp"
#include "wire.hpp"

namespace weft {

struct Offer {
    EndpointKind kind;
    std::uint32_t addr_format;
    std::string provider;
    std::string fabric;
    std::vector<std::byte> token;
    std::vector<std::byte> address;
    std::string report;
};

inline std::vector<std::byte> encode(const Offer& o)
{
    wire::Writer w;
    w.u8(o.kind == EndpointKind::msg ? 0 : 1);
    w.u32(o.addr_format);
    w.str(o.provider);
    w.str(o.fabric);
    w.bytes(o.token);
    w.bytes(o.address);
    w.str(o.report);
    return w.data();
}

inline Offer decode_offer(std::span<const std::byte> b)
{
    wire::Reader r(b, "offer");
    Offer o;
    const std::uint8_t kind = r.u8();
    if (kind > 1)
        throw Error("bootstrap", -EPROTO, "",
                    "the peer's offer names an unknown endpoint kind: the peer is not a weft "
                    "program of this version, or the data is corrupt");
    o.kind = kind == 0 ? EndpointKind::msg : EndpointKind::rdm;
    o.addr_format = r.u32();
    o.provider = r.str();
    o.fabric = r.str();
    o.token = r.bytes();
    o.address = r.bytes();
    o.report = r.str();
    r.finish();
    return o;
}

} // namespace weft
