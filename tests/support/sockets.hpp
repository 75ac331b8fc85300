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
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "random.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/bootstrap/bootstrap.hpp"

namespace weft::test {

/// A TCP port free at `address` just now (nothing listens there once this
/// returns): for a server a test starts later, or for nobody at all. Drawn
/// below the kernel's ephemeral range (ip_local_port_range), so that no
/// outgoing connection of a test running beside this one can take it as its
/// local port before the server binds it (port 0 would hand out one of those).
inline std::uint16_t free_port(const std::string& address = "127.0.0.1")
{
    unsigned ephemeral_low = 32768;
    if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
        if (std::fscanf(f, "%u", &ephemeral_low) != 1)
            ephemeral_low = 32768;
        std::fclose(f);
    }
    const unsigned low = 10000;
    const unsigned high = ephemeral_low > low + 1000 ? ephemeral_low - 1 : 32767;
    for (int tries = 0; tries < 200; ++tries) {
        const auto pick = detail::random_u64("a test's port");
        try {
            const SideListener probe(address, static_cast<std::uint16_t>(low + pick % (high - low + 1)));
            return probe.port();
        } catch (const std::exception&) {
            // taken: draw another
        }
    }
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

/// A TCP connection to a weft port that is not a weft peer: says nothing, or garbage.
class Stranger {
public:
    explicit Stranger(std::uint16_t port, const std::string& address = "127.0.0.1")
        : fd_(tcp_connect(address, port))
    {
    }
    void say(std::string_view text) { (void)!::send(fd_.get(), text.data(), text.size(), MSG_NOSIGNAL); }

private:
    detail::Fd fd_;
};

} // namespace weft::test
