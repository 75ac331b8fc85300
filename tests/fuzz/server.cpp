// SPDX-License-Identifier: MIT
// Fuzzes the Server's bootstrap engine (src/peers/server.cpp) as a stranger on its
// port would: the input, after its first byte, is everything the stranger
// sends, then it closes. The first byte picks a Server with or without a
// shared secret. Each input must end as one more rejection (the engine
// refuses it and goes on); anything else (a crash, an exception out of
// accept() other than its timeout, a hang, a leak) is a finding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "support/sockets.hpp"
#include "weft/peers/connection.hpp"
#include "weft/base/error.hpp"

namespace {

weft::Server& server(bool with_secret)
{
    static std::unique_ptr<weft::Server> servers[2];
    auto& s = servers[with_secret];
    if (!s) {
        weft::Options o;
        o.provider = "tcp";
        o.node = "127.0.0.1";
        o.secret = with_secret ? "fuzzing secret, 32 bytes long.." : "";
        o.handshake_timeout = std::chrono::seconds(5);
        s = std::make_unique<weft::Server>(o, "127.0.0.1", 0);
    }
    return *s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1 || size > 64 * 1024)
        return 0;
    weft::Server& s = server(data[0] & 1);
    const auto before = s.rejections().count;
    // A connection the kernel refuses for a moment (loopback's ports and
    // backlog under ~1000 connections a second) is no finding about weft:
    // try again; a refusal that lasts aborts with its reason.
    int fd = -1;
    for (int attempt = 1; fd < 0; ++attempt) {
        try {
            fd = weft::test::loopback_connect(s.port());
        } catch (const std::runtime_error& e) {
            if (attempt == 100) {
                std::fprintf(stderr, "fuzz: %s (100 attempts)\n", e.what());
                std::abort();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    for (std::size_t sent = 1; sent < size;) {
        const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (n <= 0)
            break; // the server refused and closed early
        sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    // The engine runs inside accept(): drive it until this stranger is refused.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s.rejections().count == before) {
        try {
            (void)s.accept(weft::Deadline::after(std::chrono::milliseconds(2)));
            std::fprintf(stderr, "fuzz: a stranger's bytes became a connection\n");
            std::abort();
        } catch (const weft::TimeoutError&) {
        }
        if (std::chrono::steady_clock::now() > until) {
            std::fprintf(stderr, "fuzz: the server neither refused nor served the input\n");
            std::abort();
        }
    }
    ::close(fd);
    return 0;
}
