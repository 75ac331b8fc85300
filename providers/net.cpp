// SPDX-License-Identifier: MIT
// net: libfabric 1.17's native TCP provider with its own RDM protocol (the
// successor of tcp;ofi_rxm, AUTO progress). Chosen only by name for now.
#include "traits.hpp"

namespace weft::providers {

const Traits net = {
    .name = "net",
    .summary = "TCP sockets with native RDM (libfabric's newer TCP provider)",
    .rank = 0,
    .msg_path = "net",
    .rdm_path = "net",
    .preferred = EndpointKind::msg,
    .auto_progress_needs_reads = true,
    .wait_fd_stays_readable = true,
    .error_hint = tcp_family_hint,
    .refine_quirks = tcp_family_quirks,
};

} // namespace weft::providers
