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

#include "support/sockets.hpp"
#include "weft/bootstrap.hpp"
#include "weft/connection.hpp"
#include "weft/error.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

/// A raw TCP server on 127.0.0.1 that runs `script` on the first connection.
class RawServer {
public:
    template <class F>
    explicit RawServer(F script)
    {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(fd_, 1) == 0);
        socklen_t len = sizeof a;
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this, script] {
            const int c = ::accept(fd_, nullptr, nullptr);
            if (c >= 0) {
                script(c);
                ::close(c);
            }
        });
    }
    ~RawServer()
    {
        thread_.join();
        ::close(fd_);
    }
    std::uint16_t port() const { return port_; }

private:
    int fd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

void send_all(int fd, const void* p, std::size_t n) { (void)!::send(fd, p, n, MSG_NOSIGNAL); }

std::string connect_error(std::uint16_t port, std::chrono::seconds d = 5s)
{
    try {
        (void)SideChannel::connect("127.0.0.1", port, Deadline::after(d));
    } catch (const Error& e) {
        return e.what();
    }
    return "(connected)";
}

std::string connect_error_with(std::uint16_t port, const std::string& secret)
{
    try {
        (void)SideChannel::connect("127.0.0.1", port, Deadline::after(5s), secret);
    } catch (const Error& e) {
        return e.what();
    }
    return "(connected)";
}

} // namespace

TEST_CASE("side channel: hello, frames and regions both ways", "[bootstrap]")
{
    SideListener listener("127.0.0.1", 0);
    auto server = std::async(std::launch::async, [&] {
        SideChannel s = listener.accept(Deadline::after(10s));
        auto got = s.receive(Frame::data, Deadline::after(10s));
        s.send(Frame::data, got, Deadline::after(10s)); // echo
        return s.peer();
    });
    SideChannel c = SideChannel::connect("127.0.0.1", listener.port(), Deadline::after(10s));
    const std::string msg = "weft side channel";
    c.send(Frame::data, std::as_bytes(std::span(msg.data(), msg.size())), Deadline::after(10s));
    const auto echo = c.receive(Frame::data, Deadline::after(10s));
    CHECK(std::string(reinterpret_cast<const char*>(echo.data()), echo.size()) == msg);
    CHECK_THAT(server.get(), Catch::StartsWith("127.0.0.1:"));
    CHECK(c.local_address() == "127.0.0.1");
}

TEST_CASE("side channel: a client started first waits for a late server", "[bootstrap]")
{
    // Find a free port, then start listening on it only after the client tries.
    std::uint16_t port = 0;
    {
        SideListener probe("127.0.0.1", 0);
        port = probe.port();
    }
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
    std::uint16_t port = 0;
    {
        SideListener probe("127.0.0.1", 0);
        port = probe.port();
    } // nothing listens there now
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

TEST_CASE("side channel: an oversized frame is garbage", "[bootstrap][bad-input]")
{
    RawServer huge([](int fd) {
        unsigned char h[12] = {'W', 'E', 'F', 'T', bootstrap_version, 0, 1, 0, 0, 0, 0, 0x40};
        send_all(fd, h, sizeof h);
    });
    CHECK_THAT(connect_error(huge.port()), Catch::Contains("garbage"));
}

TEST_CASE("host:port parsing rejects what it cannot use", "[bootstrap][bad-input]")
{
    CHECK(split_host_port("10.0.0.1:7471") == std::pair<std::string, std::uint16_t>{"10.0.0.1", 7471});
    CHECK(split_host_port("[::1]:80") == std::pair<std::string, std::uint16_t>{"::1", 80});
    CHECK(split_host_port(":0").first.empty());
    CHECK_THROWS_WITH(split_host_port("10.0.0.1"), Catch::Contains("has no port"));
    CHECK_THROWS_WITH(split_host_port("host:99999"), Catch::Contains("not a port number"));
    CHECK_THROWS_WITH(split_host_port("host:abc"), Catch::Contains("not a port number"));
}

// ---- truncated and malformed handshakes ----

namespace {

/// A frame header for `type` with `len` payload bytes, in this version.
std::array<unsigned char, 12> header(Frame type, std::uint32_t len)
{
    std::array<unsigned char, 12> h = {'W', 'E', 'F', 'T', bootstrap_version, 0,
                                       static_cast<unsigned char>(type), 0};
    for (int i = 0; i < 4; ++i)
        h[8 + static_cast<std::size_t>(i)] = static_cast<unsigned char>(len >> (8 * i));
    return h;
}

/// Sends a hello frame with `flags`.
void raw_hello(int fd, std::uint32_t flags)
{
    const auto h = header(Frame::hello, 8);
    send_all(fd, h.data(), h.size());
    const unsigned char body[8] = {static_cast<unsigned char>(flags), 0, 0, 0, 'r', 'a', 'w', '!'};
    send_all(fd, body, sizeof body);
}

/// Reads one frame; its type, or -1 when the peer closed.
int read_frame(int fd)
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
std::vector<unsigned> frames_until_close(int fd)
{
    std::vector<unsigned> types;
    for (int t; (t = read_frame(fd)) >= 0;)
        types.push_back(static_cast<unsigned>(t));
    return types;
}

const std::string secret_a = "correct horse battery staple 42";
const std::string secret_b = "an entirely different secret!!!";

} // namespace

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
            const auto h = header(Frame::hello, 100);
            send_all(fd, h.data(), h.size());
            send_all(fd, "abc", 3);
        });
        CHECK_THAT(connect_error(cut.port(), 30s), Catch::Contains("closed the side channel"));
    }
    SECTION("a hello too short to carry its flags")
    {
        RawServer tiny([](int fd) {
            const auto h = header(Frame::hello, 2);
            send_all(fd, h.data(), h.size());
            send_all(fd, "ab", 2);
        });
        CHECK_THAT(connect_error(tiny.port()), Catch::Contains("garbage"));
    }
    SECTION("a frame of the wrong type where hello belongs")
    {
        RawServer wrong([](int fd) {
            const auto h = header(Frame::region, 0);
            send_all(fd, h.data(), h.size());
        });
        CHECK_THAT(connect_error(wrong.port()), Catch::Contains("protocol error"));
    }
}

TEST_CASE("shared secret: peers holding it connect, and say so", "[bootstrap][secret]")
{
    SideListener listener("127.0.0.1", 0);
    auto server = std::async(std::launch::async, [&] {
        SideChannel s = listener.accept(Deadline::after(10s), secret_a);
        s.send(Frame::data, std::as_bytes(std::span(secret_b.data(), 4)), Deadline::after(10s));
        return s.authenticated();
    });
    SideChannel c = SideChannel::connect("127.0.0.1", listener.port(), Deadline::after(10s), secret_a);
    CHECK(c.authenticated());
    CHECK(c.receive(Frame::data, Deadline::after(10s)).size() == 4);
    CHECK(server.get());
}

TEST_CASE("shared secret: a stranger learns no address, token or key", "[bootstrap][secret][bad-input]")
{
    // A real weft server with a secret; the stranger speaks the protocol but
    // holds no secret, then a wrong one. It must see hello / challenge / error
    // frames only: never an offer (fabric address and token) or a region.
    Options opts;
    opts.provider = "tcp";
    opts.node = "127.0.0.1";
    opts.secret = secret_a;
    Server server(opts, "127.0.0.1", 0);
    const auto stranger = [&](std::uint32_t flags, bool answer) {
        return std::async(std::launch::async, [&server, flags, answer] {
            const int fd = test::loopback_connect(server.port());
            raw_hello(fd, flags);
            if (answer) { // a guessed proof: 32 B nonce + 32 B "HMAC"
                const auto h = header(Frame::proof, 64);
                std::array<unsigned char, 64> guess{};
                guess.fill(0x5a);
                send_all(fd, h.data(), h.size());
                send_all(fd, guess.data(), guess.size());
            }
            auto types = frames_until_close(fd);
            ::close(fd);
            return types;
        });
    };
    for (const auto& [flags, answer] : {std::pair{0u, false}, std::pair{1u, true}}) {
        auto seen = stranger(flags, answer);
        // The stranger is dropped and counted; accept() goes on waiting for a
        // real client, and its timeout names what it rejected meanwhile.
        const auto reason = flags ? Catch::Contains("failed the shared-secret check")
                                  : Catch::Contains("does not use a shared secret");
        CHECK_THROWS_WITH(server.accept(Deadline::after(2s)), reason);
        REQUIRE(!server.rejections().recent.empty());
        CHECK_THAT(server.rejections().recent.back(), reason);
        for (unsigned t : seen.get()) {
            INFO("frame type " << t);
            CHECK((t == unsigned(Frame::hello) || t == unsigned(Frame::challenge) ||
                   t == unsigned(Frame::error)));
        }
    }
    // The server still serves a peer that holds the secret.
    Options client = opts;
    client.node.clear();
    auto peer = std::async(std::launch::async, [&] {
        return Connection::connect(fmt::format("127.0.0.1:{}", server.port()), client,
                                   Deadline::after(20s))
            .side()
            .authenticated();
    });
    CHECK(server.accept(Deadline::after(20s)).side().authenticated());
    CHECK(peer.get());
}

TEST_CASE("shared secret: each mismatch is named on both sides", "[bootstrap][secret][bad-input]")
{
    struct Case {
        std::string server, client, server_says, client_says;
    };
    const Case cases[] = {
        {secret_a, "", "does not use a shared secret", "requires a shared secret"},
        {"", secret_a, "requires a shared secret", "does not use a shared secret"},
        {secret_a, secret_b, "failed the shared-secret check", "secrets differ"},
    };
    for (const auto& k : cases) {
        SideListener listener("127.0.0.1", 0);
        auto server = std::async(std::launch::async, [&] {
            try {
                (void)listener.accept(Deadline::after(10s), k.server);
            } catch (const Error& e) {
                CHECK(e.code() == -FI_EACCES);
                return std::string(e.what());
            }
            return std::string("(accepted)");
        });
        std::string client;
        try {
            (void)SideChannel::connect("127.0.0.1", listener.port(), Deadline::after(10s), k.client);
            client = "(connected)";
        } catch (const Error& e) {
            client = e.what();
        }
        CHECK_THAT(server.get(), Catch::Contains(k.server_says));
        CHECK_THAT(client, Catch::Contains(k.client_says));
    }
}

TEST_CASE("shared secret: an impostor server is caught before anything is sent",
          "[bootstrap][secret][bad-input]")
{
    RawServer impostor([](int fd) {
        raw_hello(fd, 1);
        const auto h = header(Frame::challenge, 32);
        std::array<unsigned char, 32> nonce{};
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size());
        (void)frames_until_close(fd); // the client's hello and proof, and no answer
    });
    // The impostor never answers with a proof: the client must time out, not hang.
    std::string text;
    try {
        (void)SideChannel::connect("127.0.0.1", impostor.port(), Deadline::after(1s), secret_a);
    } catch (const Error& e) {
        text = e.what();
    }
    CHECK_THAT(text, Catch::Contains("proof"));

    RawServer liar([](int fd) {
        raw_hello(fd, 1);
        auto h = header(Frame::challenge, 32);
        std::array<unsigned char, 32> nonce{};
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size());
        CHECK(read_frame(fd) == int(Frame::hello));
        CHECK(read_frame(fd) == int(Frame::proof));
        h = header(Frame::proof, 32);
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size()); // not the HMAC
        std::this_thread::sleep_for(200ms);
    });
    CHECK_THAT(connect_error_with(liar.port(), secret_a),
               Catch::Contains("answered the shared-secret challenge wrongly"));
}

TEST_CASE("shared secret: a short one is refused with the fix", "[bootstrap][secret][bad-input]")
{
    CHECK_THROWS_WITH(check_secret("hunter2"),
                      Catch::Contains("too short") && Catch::Contains("/dev/urandom"));
    SideListener listener("127.0.0.1", 0);
    CHECK_THROWS_AS(listener.accept(Deadline::after(1s), "short"), UsageError);
}
