// SPDX-License-Identifier: MIT
// On iWARP, rdma_cm ports share the TCP port space: a port rdma_cm picks at
// random may be one a TCP socket holds, and the device's own TCP bind fails
// with -FI_EADDRINUSE (siw: at fi_listen, at ofi_rxm's fi_enable and in the
// event that should be FI_CONNECTED). siw opts out of the port mapper
// (IW_F_NO_PORT_MAP), so iwpmd does not prevent it. The failure is local and
// immediate; creating the object again picks another port ("verbs: on iWARP,
// connections survive rdma_cm ports that TCP sockets hold").
#pragma once

#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "socket.hpp"
#include "weft/base/error.hpp"

namespace weft::detail {

/// Calls `make` until it does not fail with -FI_EADDRINUSE: up to 16 times
/// when `local` leaves the port to the provider (no source address, or port
/// 0), once when the caller fixed it. At a clash rate p, all 16 attempts clash
/// with probability p^16.
template <class Make>
auto retry_on_port_clash(const fi_info* local, Make&& make)
{
    const bool automatic = local == nullptr || local->src_addr == nullptr ||
                           local->src_addrlen == 0 ||
                           port_of(static_cast<const sockaddr*>(local->src_addr)) == 0;
    const int attempts = automatic ? 16 : 1;
    for (int attempt = 1;; ++attempt) {
        try {
            return make();
        } catch (const Error& e) {
            if (e.code() != -FI_EADDRINUSE || attempt >= attempts)
                throw;
        }
    }
}

} // namespace weft::detail
