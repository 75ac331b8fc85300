// SPDX-License-Identifier: MIT
// sockets: libfabric's original TCP provider, kept as a last resort.
#include <cstdlib>

#include "traits.hpp"

namespace weft::providers {
namespace {

// sockets runs a progress thread per domain (FI_PROGRESS_AUTO), which spins
// for FI_SOCKETS_PE_WAITTIME ms (10 by default) after each wake-up before it
// sleeps again: two processes' spinning threads beside their own on 2 cores
// took 12-20 ms an operation at depth 1. libfabric reads the variable when it
// initialises, so weft sets it first, unless the user chose a value.
std::string sockets_prepare()
{
    if (std::getenv("FI_SOCKETS_PE_WAITTIME"))
        return {};
    ::setenv("FI_SOCKETS_PE_WAITTIME", "0", 0);
    return "FI_SOCKETS_PE_WAITTIME=0 so that sockets' progress threads sleep once idle";
}

} // namespace

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
    .prepare = sockets_prepare,
};

} // namespace weft::providers
