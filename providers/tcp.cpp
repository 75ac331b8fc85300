// SPDX-License-Identifier: MIT
// tcp: libfabric's TCP provider. MSG endpoints natively (AUTO progress); RDM
// through the ofi_rxm utility layer, whose data progress is MANUAL.
#include "traits.hpp"

namespace weft::providers {

const Traits tcp = {
    .name = "tcp",
    .summary = "TCP sockets; runs anywhere with IP (no RDMA)",
    .rank = 20,
    .auto_progress_needs_reads = true,
    .msg_path = "tcp",
    .rdm_path = "tcp;ofi_rxm",
    .preferred = EndpointKind::msg,
};

} // namespace weft::providers
