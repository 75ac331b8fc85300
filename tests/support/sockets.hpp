// SPDX-License-Identifier: MIT
// Plain TCP for tests: a free port, and a client socket for tests that play
// a stranger on a weft port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "weft/bootstrap.hpp"

namespace weft::test {

/// A TCP port free at `address` just now (nothing listens there once this
/// returns): for a server a test starts later, or for nobody at all.
inline std::uint16_t free_port(const std::string& address = "127.0.0.1")
{
    const SideListener probe(address, 0);
    return probe.port();
}

/// A socket connected to `address`:`port` (IPv4); throws when it cannot connect.
inline int tcp_connect(const std::string& address, std::uint16_t port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (fd < 0 || ::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        if (fd >= 0)
            ::close(fd);
        throw std::runtime_error("cannot connect to " + address + ":" + std::to_string(port) +
                                 ": " + std::strerror(e));
    }
    return fd;
}

/// A socket connected to 127.0.0.1:port; throws when it cannot connect.
inline int loopback_connect(std::uint16_t port) { return tcp_connect("127.0.0.1", port); }

} // namespace weft::test
