// SPDX-License-Identifier: MIT
// The side channel's wire from the outside, for its tests: a listener whose
// first channel a function serves, a raw TCP server that runs a script on its
// first connection, hand-made frames (an oracle written apart from
// src/bootstrap/side_wire.cpp), and the error a connect ends with.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "side_wire.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/base/error.hpp"

namespace weft::test {

using namespace std::chrono_literals;

/// A side channel listener on 127.0.0.1, and `serve(listener)` running on a
/// thread of its own from the start (it accepts, with or without a secret);
/// get() is what it returned, or rethrows what it threw.
template <class R>
class SideServer {
public:
    template <class F>
    explicit SideServer(F serve)
        : result_(std::async(std::launch::async, [this, serve] { return serve(listener_); }))
    {
    }
    std::uint16_t port() const { return listener_.port(); }
    R get() { return result_.get(); }

private:
    SideListener listener_{"127.0.0.1", 0};
    std::future<R> result_; // last: serves once the listener exists
};
template <class F>
SideServer(F) -> SideServer<std::invoke_result_t<F, SideListener&>>;

/// A raw TCP server on 127.0.0.1 that runs `script` on the first connection,
/// then ends its side and reads until the client closes (10 s at most a read): closed
/// with the client's hello unread, its socket would reset the connection, and
/// the client could lose what the script sent before it read it (a CI run).
class RawServer {
public:
    template <class F>
    explicit RawServer(F script)
    {
        fd_.reset(::socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_.get(), 1) == 0);
        socklen_t len = sizeof a;
        getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this, script] {
            const detail::Fd c(::accept(fd_.get(), nullptr, nullptr));
            if (c.get() >= 0) {
                script(c.get());
                ::shutdown(c.get(), SHUT_WR);
                const timeval patience{10, 0}; // each read; the client closes long before
                ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
                char sink[256];
                while (::recv(c.get(), sink, sizeof sink, 0) > 0) {
                }
            }
        });
    }
    ~RawServer() { thread_.join(); }
    std::uint16_t port() const { return port_; }

private:
    detail::Fd fd_;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

inline void send_all(int fd, const void* p, std::size_t n) { (void)!::send(fd, p, n, MSG_NOSIGNAL); }

/// What a side channel connect to 127.0.0.1:`port` (within `d`, holding
/// `secret`) ends with: its error, or "(connected)".
inline std::string connect_error(std::uint16_t port, std::chrono::seconds d = 5s,
                                 const std::string& secret = {})
{
    try {
        (void)SideChannel::connect("127.0.0.1", port, Deadline::after(d), secret);
    } catch (const Error& e) {
        return e.what();
    }
    return "(connected)";
}


/// A frame header for `type` with `len` payload bytes, in this version.
inline std::array<unsigned char, 12> header(detail::Frame type, std::uint32_t len)
{
    std::array<unsigned char, 12> h = {'W', 'E', 'F', 'T', bootstrap_version, 0,
                                       static_cast<unsigned char>(type), 0};
    for (int i = 0; i < 4; ++i)
        h[8 + static_cast<std::size_t>(i)] = static_cast<unsigned char>(len >> (8 * i));
    return h;
}

/// Sends a hello frame with `flags`.
inline void raw_hello(int fd, std::uint32_t flags)
{
    const auto h = header(detail::Frame::hello, 8);
    send_all(fd, h.data(), h.size());
    const unsigned char body[8] = {static_cast<unsigned char>(flags), 0, 0, 0, 'r', 'a', 'w', '!'};
    send_all(fd, body, sizeof body);
}

/// Reads one frame; its type, or -1 when the peer closed.
inline int read_frame(int fd)
{
    unsigned char h[12];
    if (::recv(fd, h, sizeof h, MSG_WAITALL) != 12)
        return -1;
    const std::uint32_t len = h[8] | (h[9] << 8) | (h[10] << 16) | (std::uint32_t(h[11]) << 24);
    std::vector<unsigned char> body(len);
    if (len && ::recv(fd, body.data(), len, MSG_WAITALL) != static_cast<ssize_t>(len))
        return -1;
    return h[6] | (h[7] << 8);
}

/// Reads frames until the peer closes; returns their types.
inline std::vector<unsigned> frames_until_close(int fd)
{
    std::vector<unsigned> types;
    for (int t; (t = read_frame(fd)) >= 0;)
        types.push_back(static_cast<unsigned>(t));
    return types;
}

inline const std::string secret_a = "correct horse battery staple 42";
inline const std::string secret_b = "an entirely different secret!!!";


} // namespace weft::test
