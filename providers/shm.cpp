// SPDX-License-Identifier: MIT
// shm: shared memory between processes of one host. RDM only; requires
// FI_MR_VIRT_ADDR; moves large data with cross-memory attach (process_vm_readv
// and process_vm_writev), which needs ptrace permission over the peer.
#include <cstdio>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"

namespace weft::providers {
namespace {

std::string shm_hint(int code)
{
    if (code != -FI_EPERM && code != -FI_EACCES && code != -FI_EIO)
        return {};
    std::string scope = "absent (no Yama LSM)";
    if (std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
        int v = -1;
        if (std::fscanf(f, "%d", &v) == 1)
            scope = std::to_string(v);
        std::fclose(f);
    }
    return fmt::format(
        "shm moves data with cross-memory attach (process_vm_readv/writev), which needs "
        "ptrace permission over the peer process; /proc/sys/kernel/yama/ptrace_scope is {}. "
        "Fix: sysctl kernel.yama.ptrace_scope=0, or run with CAP_SYS_PTRACE "
        "(containers: --cap-add SYS_PTRACE), and keep both processes dumpable",
        scope);
}

} // namespace

const Traits shm = {
    .name = "shm",
    .summary = "shared memory between processes on one host",
    .rank = 5, // first when the caller says both peers share this host
    .same_host_only = true,
    .ip_addressing = false,
    .msg_path = "",
    .rdm_path = "shm",
    .preferred = EndpointKind::rdm,
    // Its fast RMA path (cross-memory attach) never asks the target, so the
    // key is not checked.
    .keys_unchecked = true,
    .dead_peer_blocks_endpoint = true,
    .error_hint = shm_hint,
};

} // namespace weft::providers
