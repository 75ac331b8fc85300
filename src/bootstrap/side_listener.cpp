// SPDX-License-Identifier: MIT
// SideListener: the side channel's listening socket, and accepting a client
// through the Hello (and shared-secret) exchange.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "side_wire.hpp"
#include "socket.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/base/error.hpp"

namespace weft {

using detail::address_text;
using detail::port_of;
using detail::resolve;
using detail::set_nonblocking;
using detail::side_fail;
using detail::side_fail_errno;
using detail::wait_fd;

SideListener::SideListener(std::string_view host, std::uint16_t port)
    : host_(host.empty() ? "0.0.0.0" : std::string(host))
{
    auto addrs = resolve(host_, port, true);
    std::string last = "no address";
    for (const addrinfo* a = addrs.get(); a; a = a->ai_next) {
        detail::Fd owned(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!owned)
            continue;
        const int fd = owned.get();
        detail::share_port(fd);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
            port_ = port_of(reinterpret_cast<sockaddr*>(&ss));
            set_nonblocking(fd);
            fd_ = std::move(owned);
            return;
        }
        last = std::strerror(errno);
    }
    side_fail(-FI_EADDRINUSE, fmt::format("cannot listen on {}:{} for the side channel: {} (is another "
                                          "server using the port? pick another with host:port)",
                                          host_, port, last));
}

SideChannel SideListener::accept(Deadline deadline, std::string_view secret)
{
    if (!secret.empty())
        check_secret(secret);
    const bool late = deadline.expired();
    for (;;) {
        if (!wait_fd(fd_.get(), POLLIN, deadline))
            side_fail(-FI_ETIMEDOUT,
                      late ? detail::late_text("accepting a client", fmt::format("{}:{}", host_, port_))
                           : fmt::format("no client connected to {}:{} before the deadline", host_,
                                         port_));
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        detail::Fd owned(::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
        if (!owned) {
            if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                continue;
            side_fail_errno("accept", "side channel");
        }
        const auto* sa = reinterpret_cast<sockaddr*>(&ss);
        std::string peer = fmt::format("{}:{}", address_text(sa), port_of(sa));
        return SideChannel(owned.release(), std::move(peer), deadline, detail::Role::acceptor, secret);
    }
}

} // namespace weft
