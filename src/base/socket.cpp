// SPDX-License-Identifier: MIT
// POSIX socket helpers of the side channel.
#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft::detail {

void close_fd(int fd) noexcept { (void)::close(fd); }

std::string late_text(std::string_view doing, std::string_view where)
{
    return fmt::format("the deadline had already passed before {} ({}) began, so weft did not "
                       "wait: nothing is known to be wrong there. Give the call a deadline in "
                       "the future (Deadline::after, or Deadline::never())",
                       doing, where);
}

[[noreturn]] void side_fail(int code, const std::string& message)
{
    if (code == -FI_ETIMEDOUT)
        throw TimeoutError("bootstrap", code, "", message);
    throw Error("bootstrap", code, "", message);
}

[[noreturn]] void side_fail_errno(std::string_view call, const std::string& context)
{
    const int e = errno;
    side_fail(-e, fmt::format("{}: {} ({})", call, std::strerror(e), context));
}

std::string address_text(const sockaddr* sa)
{
    std::array<char, INET6_ADDRSTRLEN> host{};
    if (sa->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        inet_ntop(AF_INET, &in->sin_addr, host.data(), host.size());
        return host.data();
    }
    if (sa->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
        inet_ntop(AF_INET6, &in6->sin6_addr, host.data(), host.size());
        return host.data();
    }
    return "?";
}

std::uint16_t port_of(const sockaddr* sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
    return 0;
}

void set_nonblocking(int fd)
{
    const int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

std::optional<Accepted> accept_waiting(int listen_fd)
{
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    Fd fd(::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd)
        return std::nullopt;
    set_nodelay(fd.get());
    const auto* sa = reinterpret_cast<sockaddr*>(&ss);
    std::string peer = address_text(sa) + ":" + std::to_string(port_of(sa));
    return Accepted{std::move(fd), std::move(peer)};
}

void share_port(int fd)
{
    int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
}

void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool wait_fd(int fd, short events, Deadline deadline)
{
    for (;;) {
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, deadline.remaining_ms());
        if (r > 0)
            return true;
        if (r == 0)
            return false;
        if (errno != EINTR)
            side_fail_errno("poll", "side channel");
    }
}

AddrInfoPtr resolve(std::string_view host, std::uint16_t port, bool passive)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    const std::string h(host);
    const std::string service = std::to_string(port);
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(h.empty() ? nullptr : h.c_str(), service.c_str(), &hints, &res);
    if (rc != 0)
        side_fail(-FI_EADDRNOTAVAIL,
             fmt::format("cannot resolve side-channel host '{}': {}", host, gai_strerror(rc)));
    return AddrInfoPtr(res);
}

} // namespace weft::detail
