// SPDX-License-Identifier: MIT
// POSIX socket helpers of the side channel (bootstrap.cpp): addresses, socket
// options, waiting with a deadline, name resolution, and its errors.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "weft/base/deadline.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft {

/// Splits "host:port" (or "[v6]:port"); throws UsageError on a malformed string.
std::pair<std::string, std::uint16_t> split_host_port(std::string_view text);

} // namespace weft

namespace weft::detail {

/// The message for a wait whose deadline had passed before it began.
std::string late_text(std::string_view doing, std::string_view where);
/// Throws the side channel's error (TimeoutError for -FI_ETIMEDOUT).
[[noreturn]] void side_fail(int code, const std::string& message);
/// The same for a failed system call, from errno.
[[noreturn]] void side_fail_errno(std::string_view call, const std::string& context);

std::string address_text(const sockaddr* sa);
std::uint16_t port_of(const sockaddr* sa);
void set_nonblocking(int fd);
void set_nodelay(int fd);
/// SO_REUSEADDR on a socket that connects: its ephemeral port stays
/// bindable by other sockets that also reuse addresses. On iWARP, rdma_cm
/// picks the port of an outgoing connection without asking TCP, and the
/// device's kernel socket (siw binds with SO_REUSEADDR) then fails with
/// EADDRINUSE where a side channel holds that port; libfabric 1.17's verbs
/// provider loses that failure (fixed in 1.21: ofiwg/libfabric 486013572),
/// so an ofi_rxm connection waits forever (siw; "server: two and eight
/// clients writing at once"; QUIRKS.md has the runs).
void share_port(int fd);
/// "", "0.0.0.0" or "::": every interface.
inline bool is_wildcard(std::string_view host)
{
    return host.empty() || host == "0.0.0.0" || host == "::";
}

/// A connection waiting on the non-blocking listening socket `listen_fd`,
/// taken non-blocking with TCP_NODELAY: its descriptor and "host:port"; none
/// when nobody waits (or accept failed: the caller's next poll tries again).
struct Accepted {
    Fd fd;
    std::string peer;
};
std::optional<Accepted> accept_waiting(int listen_fd);

/// Waits for `events` on fd; false on timeout.
bool wait_fd(int fd, short events, Deadline deadline);

struct AddrInfoDeleter {
    void operator()(addrinfo* a) const noexcept { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;
AddrInfoPtr resolve(std::string_view host, std::uint16_t port, bool passive);

} // namespace weft::detail
