// SPDX-License-Identifier: MIT
// udp: datagrams only; RDM (with RMA) through the ofi_rxd utility layer, whose
// progress is MANUAL. Chosen only by name.
#include <cstdlib>

#include "traits.hpp"

namespace weft::providers {

namespace {

// ofi_rxd's send window per peer, in packets: its "max_unacked" parameter
// (rxd_init.c, 128 by default in 1.17). See Quirks::send_window_packets.
void rxd_quirks(const fi_info*, Quirks& q)
{
    q.send_window_packets = 128;
    if (const char* v = std::getenv("FI_OFI_RXD_MAX_UNACKED"); v && *v)
        if (const long n = std::strtol(v, nullptr, 10); n > 0)
            q.send_window_packets = static_cast<std::size_t>(n);
}

} // namespace

const Traits udp = {
    .name = "udp",
    .summary = "UDP datagrams; RDM through ofi_rxd",
    .rank = 0,
    .msg_path = "",
    .rdm_path = "udp;ofi_rxd",
    .preferred = EndpointKind::rdm,
    // ofi_rxd drops a refused RMA without an error completion, and its fetch
    // atomics return wrong data and then crash (libfabric 1.17). Tests: "bad
    // input: wrong key, out of bounds, oversized message"; "atomics: fetch-add
    // and compare-and-swap, or a clear refusal".
    .remote_errors_silent = true,
    .atomics_unreliable = true,
    .refine_quirks = rxd_quirks,
};

} // namespace weft::providers
