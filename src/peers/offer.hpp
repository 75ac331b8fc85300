// SPDX-License-Identifier: MIT
// The server's offer on the side channel (bootstrap v3): {token, the server
// Node's address, the server's report}. The client connects to that Node (MSG:
// presenting the token in its connection request, which the server's Node
// admits; RDM: nothing on the wire) and answers `ready` with its own Node's
// address. Input from the network: decode() validates every length
// (wire::Reader, NodeAddress::decode) and throws weft::Error on garbage.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/peers/node_address.hpp"
#include "wire.hpp"

namespace weft {

struct Offer {
    std::vector<std::byte> token; ///< MSG: admits this client's connection request
    NodeAddress node;
    std::string report;           ///< the server's Selection::report()
};

inline std::vector<std::byte> encode(const Offer& o)
{
    wire::Writer w;
    w.bytes(o.token);
    w.bytes(o.node.encode());
    w.str(o.report);
    return w.data();
}

inline Offer decode_offer(std::span<const std::byte> b)
{
    wire::Reader r(b, "offer");
    auto token = r.bytes();
    if (token.size() > 32)
        throw Error("bootstrap", -EPROTO, "",
                    "the peer's offer carries a token longer than 32 B: the peer is not a weft "
                    "program of this version, or the data is corrupt");
    const auto node = r.bytes();
    Offer o{std::move(token), NodeAddress::decode(node), r.str()};
    r.finish();
    return o;
}

} // namespace weft
