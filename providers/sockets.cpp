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
};

} // namespace weft::providers
