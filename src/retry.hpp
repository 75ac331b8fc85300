// SPDX-License-Identifier: MIT
// On iWARP, rdma_cm ports share the TCP port space: a port rdma_cm picks at
// random may be one a TCP socket holds, and the device's own TCP bind fails
// with -FI_EADDRINUSE (measured on siw, at fi_listen, at ofi_rxm's fi_enable
// and in the event that should have been FI_CONNECTED). siw opts out of the
// port mapper (IW_F_NO_PORT_MAP), so iwpmd does not prevent it. The failure is
// local and immediate; creating the object again picks another port.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "weft/error.hpp"

namespace weft::detail {

/// True when `info` leaves the local port to the provider (no source address,
/// or one with port 0): only then is another attempt another port.
inline bool automatic_port(const fi_info* info) noexcept
{
    if (info == nullptr || info->src_addr == nullptr || info->src_addrlen == 0)
        return true;
    const auto* sa = static_cast<const sockaddr*>(info->src_addr);
    if (sa->sa_family == AF_INET && info->src_addrlen >= sizeof(sockaddr_in))
        return static_cast<const sockaddr_in*>(info->src_addr)->sin_port == 0;
    if (sa->sa_family == AF_INET6 && info->src_addrlen >= sizeof(sockaddr_in6))
        return static_cast<const sockaddr_in6*>(info->src_addr)->sin6_port == 0;
    return false; // not an IP address: nothing weft can tell about its port
}

/// Calls `make` until it does not fail with -FI_EADDRINUSE, at most `attempts`
/// times. At a clash rate p, all 16 attempts clash with probability p^16.
template <class Make>
auto retry_on_port_clash(Make&& make, int attempts = 16)
{
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
