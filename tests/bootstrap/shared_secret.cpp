// SPDX-License-Identifier: MIT
// The side channel's shared secret: peers that hold it connect; a stranger,
// a mismatch on either side, an impostor server and a short secret are each
// refused, saying which.
#include <catch2/catch.hpp>

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

TEST_CASE("shared secret: peers holding it connect, and say so", "[bootstrap][secret]")
{
    SideServer server([](SideListener& l) {
        SideChannel s = l.accept(Deadline::after(10s), secret_a);
        s.send(detail::Frame::data, std::as_bytes(std::span(secret_b.data(), 4)), Deadline::after(10s));
        return s.authenticated();
    });
    SideChannel c = SideChannel::connect("127.0.0.1", server.port(), Deadline::after(10s), secret_a);
    CHECK(c.authenticated());
    CHECK(c.receive(detail::Frame::data, Deadline::after(10s)).size() == 4);
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
                const auto h = header(detail::Frame::proof, 64);
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
            CHECK((t == unsigned(detail::Frame::hello) || t == unsigned(detail::Frame::challenge) ||
                   t == unsigned(detail::Frame::error)));
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
        SideServer server([&k](SideListener& l) {
            try {
                (void)l.accept(Deadline::after(10s), k.server);
            } catch (const Error& e) {
                CHECK(e.code() == -FI_EACCES);
                return std::string(e.what());
            }
            return std::string("(accepted)");
        });
        const std::string client = connect_error(server.port(), 10s, k.client);
        CHECK_THAT(server.get(), Catch::Contains(k.server_says));
        CHECK_THAT(client, Catch::Contains(k.client_says));
    }
}

TEST_CASE("shared secret: an impostor server is caught before anything is sent",
          "[bootstrap][secret][bad-input]")
{
    RawServer impostor([](int fd) {
        raw_hello(fd, 1);
        const auto h = header(detail::Frame::challenge, 32);
        std::array<unsigned char, 32> nonce{};
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size());
        (void)frames_until_close(fd); // the client's hello and proof, and no answer
    });
    // The impostor never answers with a proof: the client must time out, not hang.
    CHECK_THAT(connect_error(impostor.port(), 1s, secret_a), Catch::Contains("proof"));

    RawServer liar([](int fd) {
        raw_hello(fd, 1);
        auto h = header(detail::Frame::challenge, 32);
        std::array<unsigned char, 32> nonce{};
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size());
        CHECK(read_frame(fd) == int(detail::Frame::hello));
        CHECK(read_frame(fd) == int(detail::Frame::proof));
        h = header(detail::Frame::proof, 32);
        send_all(fd, h.data(), h.size());
        send_all(fd, nonce.data(), nonce.size()); // not the HMAC
        std::this_thread::sleep_for(200ms);
    });
    CHECK_THAT(connect_error(liar.port(), 5s, secret_a),
               Catch::Contains("answered the shared-secret challenge wrongly"));
}

TEST_CASE("shared secret: a short one is refused with the fix", "[bootstrap][secret][bad-input]")
{
    CHECK_THROWS_WITH(check_secret("hunter2"),
                      Catch::Contains("too short") && Catch::Contains("/dev/urandom"));
    SideListener listener("127.0.0.1", 0);
    CHECK_THROWS_AS(listener.accept(Deadline::after(1s), "short"), UsageError);
}

