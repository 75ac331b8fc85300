// SPDX-License-Identifier: MIT
// `weft info` and `weft doctor`: what is on this machine, and what stops weft.
#pragma once

#include <string>

namespace weft::tool {

/// Lists providers, fabrics, domains and RDMA devices, and the order weft
/// would choose in with each verdict. Returns the exit status.
int info(bool json);

struct DoctorOptions {
    bool json = false;
    int shm_peer = 0; ///< also check cross-memory attach to this process
};
/// Preflight checks with verdicts and fixes. Exit status: 0 when weft can run
/// RDMA here, 1 when it cannot (it falls back), 2 when no provider works at all.
int doctor(const DoctorOptions& options);

} // namespace weft::tool
