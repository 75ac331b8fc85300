// SPDX-License-Identifier: MIT
// The side channel: handshake, and each way it can go wrong.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "side_wire.hpp"
#include "support/raw_side.hpp"
#include "support/sockets.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/peers/connection.hpp"
#include "weft/base/error.hpp"

using namespace weft;
using namespace std::chrono_literals;
using namespace weft::test;


TEST_CASE("side channel: hello, frames and regions both ways", "[bootstrap]")
{
    SideServer server([](SideListener& l) {
        SideChannel s = l.accept(Deadline::after(10s));
        auto got = s.receive(detail::Frame::data, Deadline::after(10s));
        s.send(detail::Frame::data, got, Deadline::after(10s)); // echo
        return s.peer();
    });
    SideChannel c = SideChannel::connect("127.0.0.1", server.port(), Deadline::after(10s));
    const std::string msg = "weft side channel";
    c.send(detail::Frame::data, std::as_bytes(std::span(msg.data(), msg.size())), Deadline::after(10s));
    const auto echo = c.receive(detail::Frame::data, Deadline::after(10s));
    CHECK(std::string(reinterpret_cast<const char*>(echo.data()), echo.size()) == msg);
    CHECK_THAT(server.get(), Catch::StartsWith("127.0.0.1:"));
    CHECK(c.local_address() == "127.0.0.1");
}

TEST_CASE("side channel: a client started first waits for a late server", "[bootstrap]")
{
    // Find a free port, then start listening on it only after the client tries.
    const std::uint16_t port = free_port();
    auto late = std::async(std::launch::async, [port] {
        std::this_thread::sleep_for(300ms);
        SideListener l("127.0.0.1", port);
        SideChannel s = l.accept(Deadline::after(10s));
        return s.peer();
    });
    SideChannel c = SideChannel::connect("127.0.0.1", port, Deadline::after(10s));
    CHECK_FALSE(late.get().empty());
}

TEST_CASE("side channel: an unreachable peer times out with the reason", "[bootstrap][bad-input]")
{
    const std::uint16_t port = free_port(); // nothing listens there
    const auto start = Clock::now();
    try {
        (void)SideChannel::connect("127.0.0.1", port, Deadline::after(1s));
        FAIL("connected to nothing");
    } catch (const TimeoutError& e) {
        CHECK(e.code() == -FI_ETIMEDOUT);
        CHECK_THAT(e.what(), Catch::Contains("could not reach") && Catch::Contains("Connection refused"));
    }
    CHECK(Clock::now() - start < 5s);
}

TEST_CASE("side channel: a peer that is not weft is named as such", "[bootstrap][bad-input]")
{
    RawServer http([](int fd) {
        const char* reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
        send_all(fd, reply, std::strlen(reply));
    });
    const auto text = connect_error(http.port());
    CHECK_THAT(text, Catch::Contains("is not a weft peer") && Catch::Contains("'HTTP'"));
}

TEST_CASE("side channel: a version mismatch says which versions", "[bootstrap][bad-input]")
{
    RawServer future([](int fd) {
        unsigned char h[12] = {'W', 'E', 'F', 'T', 9, 0, 1, 0, 0, 0, 0, 0};
        send_all(fd, h, sizeof h);
    });
    const auto text = connect_error(future.port());
    CHECK_THAT(text, Catch::Contains("version mismatch") && Catch::Contains("v9") &&
                         Catch::Contains(fmt::format("v{}", bootstrap_version)));
}

TEST_CASE("side channel: a vanished peer is reported, not waited on", "[bootstrap][bad-input]")
{
    RawServer gone([](int) {}); // accepts and closes at once
    const auto start = Clock::now();
    const auto text = connect_error(gone.port(), 30s);
    CHECK_THAT(text, Catch::Contains("closed the side channel"));
    CHECK(Clock::now() - start < 5s);
}

TEST_CASE("side channel: a peer that said why it closed is heard out by a send that fails",
          "[bootstrap][bad-input]")
{
    SideServer server([](SideListener& l) {
        SideChannel s = l.accept(Deadline::after(10s));
        s.send_error("the bootstrap took too long (Options::handshake_timeout)");
        return s.peer(); // closed here, unread
    });
    SideChannel c = SideChannel::connect("127.0.0.1", server.port(), Deadline::after(10s));
    (void)server.get();
    const std::vector<std::byte> ready(16);
    try {
        // The first sends may still land in the socket's buffer; one soon fails.
        for (int i = 0; i < 100; ++i) {
            c.send(detail::Frame::ready, ready, Deadline::after(10s));
            std::this_thread::sleep_for(10ms);
        }
        FAIL("sends to a closed peer kept succeeding");
    } catch (const Error& e) {
        // Its reason, not only "broken pipe".
        CHECK_THAT(e.what(), Catch::Contains("handshake_timeout"));
    }
}

TEST_CASE("side channel: an oversized frame is garbage", "[bootstrap][bad-input]")
{
    RawServer huge([](int fd) {
        unsigned char h[12] = {'W', 'E', 'F', 'T', bootstrap_version, 0, 1, 0, 0, 0, 0, 0x40};
        send_all(fd, h, sizeof h);
    });
    CHECK_THAT(connect_error(huge.port()), Catch::Contains("garbage"));
}

// ---- truncated and malformed handshakes ----


TEST_CASE("side channel: a truncated handshake is reported, not waited on", "[bootstrap][bad-input]")
{
    SECTION("half a header")
    {
        RawServer half([](int fd) { send_all(fd, "WEFT\x02", 5); });
        CHECK_THAT(connect_error(half.port(), 30s),
                   Catch::Contains("closed the side channel") && Catch::Contains("hello"));
    }
    SECTION("a header promising more payload than follows")
    {
        RawServer cut([](int fd) {
            const auto h = header(detail::Frame::hello, 100);
            send_all(fd, h.data(), h.size());
            send_all(fd, "abc", 3);
        });
        CHECK_THAT(connect_error(cut.port(), 30s), Catch::Contains("closed the side channel"));
    }
    SECTION("a hello too short to carry its flags")
    {
        RawServer tiny([](int fd) {
            const auto h = header(detail::Frame::hello, 2);
            send_all(fd, h.data(), h.size());
            send_all(fd, "ab", 2);
        });
        CHECK_THAT(connect_error(tiny.port()), Catch::Contains("garbage"));
    }
    SECTION("a frame of the wrong type where hello belongs")
    {
        RawServer wrong([](int fd) {
            const auto h = header(detail::Frame::region, 0);
            send_all(fd, h.data(), h.size());
        });
        CHECK_THAT(connect_error(wrong.port()), Catch::Contains("protocol error"));
    }
}

