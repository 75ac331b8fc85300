// SPDX-License-Identifier: MIT
// `weft info` and `weft doctor`: what is on this machine, and what stops weft;
// `weft store`: a TCP store server for groups.
#pragma once

#include <string>

namespace weft::tool {

struct InfoOptions {
    bool json = false;
    std::string provider; ///< only this provider and the stacks over it ("" = all)
};
/// Lists providers (one line per provider, endpoint type and domain, with the
/// fabrics it is reached on), RDMA devices, and the order weft would choose in
/// with each verdict. Returns the exit status: 1 when `provider` names none here.
int info(const InfoOptions& options);

struct DoctorOptions {
    bool json = false;
    int shm_peer = 0; ///< also check cross-memory attach to this process
    unsigned ranks = 0; ///< also check what a group of this many ranks needs
};
/// Preflight checks with verdicts and fixes. Exit status: 0 when weft can run
/// RDMA here, 1 when it cannot (it falls back), 2 when no provider works at all.
int doctor(const DoctorOptions& options);

struct StoreOptions {
    std::string listen; ///< "[host:]port"
};
/// Serves a TCP store (weft/stores/tcp_store.hpp) until SIGINT or SIGTERM.
int store(const StoreOptions& options);

} // namespace weft::tool
