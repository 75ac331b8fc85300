// SPDX-License-Identifier: MIT
// Who this process is on which host, as a co-located peer needs to know it
// before it takes the same-host lane: the same boot (a restarted or another
// machine's kernel shares no memory), the same network namespace (abstract
// AF_UNIX names live in one) and the same pid namespace (SO_PEERCRED's pid is
// comparable only there).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::lane {

struct Host {
    std::array<std::byte, 16> boot_id{}; ///< /proc/sys/kernel/random/boot_id
    std::uint64_t net_ns = 0;            ///< inode of /proc/self/ns/net
    std::uint64_t pid_ns = 0;            ///< inode of /proc/self/ns/pid
    std::uint32_t pid = 0;
    std::uint32_t uid = 0;

    friend bool operator==(const Host&, const Host&) = default;
};

/// This process; throws weft::Error when /proc cannot tell (not mounted).
Host this_host();

/// Why a process announcing `theirs` cannot share the lane with one that is
/// `mine`, in words for a selection report; empty when it can.
std::string refusal(const Host& mine, const Host& theirs);

/// "3f0c…" (32 hex digits) for a report.
std::string boot_id_text(const std::array<std::byte, 16>& id);

} // namespace weft::lane
