// SPDX-License-Identifier: MIT
// sockets: libfabric's original TCP provider, kept as a last resort. Its
// progress threads make every operation slow on small machines (milliseconds).
#include "traits.hpp"

namespace weft::providers {

const Traits sockets = {
    .name = "sockets",
    .summary = "legacy TCP provider with atomics; slow (progress threads), last resort",
    .rank = 30,
    .msg_path = "sockets",
    .rdm_path = "sockets",
    .preferred = EndpointKind::msg,
    // A peer killed mid-stream leaves an error completion (-FI_EIO, no
    // operation of ours) on a shared RDM endpoint, which the next peer's poll
    // receives under CPU load ("faults: a client killed mid-stream").
    .dead_peer_blocks_endpoint = true,
};

} // namespace weft::providers
