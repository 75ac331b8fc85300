// SPDX-License-Identifier: MIT
// udp: datagrams only; RDM (with RMA) through the ofi_rxd utility layer, whose
// progress is MANUAL. Chosen only by name.
#include "traits.hpp"

namespace weft::providers {

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
};

} // namespace weft::providers
