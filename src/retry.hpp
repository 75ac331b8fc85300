// SPDX-License-Identifier: MIT
// On iWARP, rdma_cm ports share the TCP port space: a port picked at random is
// sometimes taken (-FI_EADDRINUSE, measured on siw). Creating the object again
// picks another port.
#pragma once

#include <rdma/fi_errno.h>

#include "weft/error.hpp"

namespace weft::detail {

template <class Make>
auto retry_on_port_clash(Make&& make, int attempts = 5)
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
