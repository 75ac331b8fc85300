// SPDX-License-Identifier: MIT
/// @brief The side channel's frame types and ends (weft/bootstrap/bootstrap.hpp has the
/// format). weft's own protocol: applications send and receive their bytes
/// with SideChannel::send(payload) and receive(), which use Frame::data.
#pragma once

#include <cstdint>
#include <string_view>

namespace weft::detail {

enum class Frame : std::uint16_t {
    hello = 1,   ///< protocol and library version
    offer = 2,   ///< server -> client: provider, endpoint kind, fabric address, token
    ready = 3,   ///< client -> server: the client's endpoint address (RDM) or nothing
    region = 4,  ///< a RemoteRegion (RemoteRegion::Wire)
    barrier = 5, ///< no payload
    data = 6,    ///< application bytes
    error = 7,   ///< the peer failed; the payload says why
    challenge = 8, ///< acceptor -> connector: a random nonce (shared secret only)
    proof = 9,     ///< an HMAC over both nonces (shared secret only)
    store = 10,        ///< member -> TCP store server: a request (src/stores/store_wire.hpp)
    store_answer = 11, ///< TCP store server -> member: its answer
};
std::string_view to_string(Frame f) noexcept;

/// Which end of the side channel this is: the shared-secret exchange is not
/// symmetric (the acceptor verifies first, so it reveals nothing to a stranger).
enum class Role : std::uint8_t { connector, acceptor };

} // namespace weft::detail
