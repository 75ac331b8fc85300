// SPDX-License-Identifier: MIT
// tcp: libfabric's TCP provider. MSG endpoints natively (AUTO progress); RDM
// through the ofi_rxm utility layer, whose data progress is MANUAL.
#include <rdma/fi_errno.h>

#include "traits.hpp"

namespace weft::providers {

std::string tcp_family_hint(int code)
{
    // An operation pending when the peer dropped the connection is cancelled;
    // one posted after it finds the socket closed (ENOTCONN, "Broken pipe").
    if (code == -FI_ECANCELED || code == -FI_ENOTCONN)
        return "the connection is gone: tcp cancels every pending operation when the peer drops "
               "the connection, and a target drops it when it refuses an RMA (wrong key, out of "
               "bounds, or no remote access), so check the operation posted before this one";
    return {};
}

void tcp_family_quirks(const fi_info* info, Quirks& q)
{
    q.refusal_lost_on_reconnect = info->ep_attr && info->ep_attr->type == FI_EP_RDM;
}

const Traits tcp = {
    .name = "tcp",
    .summary = "TCP sockets; runs anywhere with IP (no RDMA)",
    .rank = 20,
    .msg_path = "tcp",
    .rdm_path = "tcp;ofi_rxm",
    .preferred = EndpointKind::msg,
    .auto_progress_needs_reads = true,
    .error_hint = tcp_family_hint,
    .refine_quirks = tcp_family_quirks,
};

} // namespace weft::providers
