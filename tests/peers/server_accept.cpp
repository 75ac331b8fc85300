// SPDX-License-Identifier: MIT
// Server::accept with many clients at once: strangers on the rendezvous port
// cost real clients nothing, several threads may accept, and each client's
// bootstrap runs beside the others'.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/sockets.hpp"
#include "weft/base/detail/fd.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// Connects `n` clients at once, each in its own thread; returns each one's
/// connect time (or throws the first failure).
std::vector<double> connect_clients(const Server& server, const Options& o, int n,
                                    std::vector<Connection>& out)
{
    std::vector<std::future<std::pair<Connection, double>>> clients;
    const Options client_options = test::client_options(server, o);
    for (int i = 0; i < n; ++i)
        clients.push_back(std::async(std::launch::async, [&, port = server.port()] {
            const auto start = Clock::now();
            Connection c = Connection::connect(test::at(port), client_options, Deadline::after(15s));
            return std::pair{std::move(c),
                             std::chrono::duration<double>(Clock::now() - start).count()};
        }));
    std::vector<double> seconds;
    for (auto& f : clients) {
        auto [c, s] = f.get();
        out.push_back(std::move(c));
        seconds.push_back(s);
    }
    return seconds;
}

/// Each pair of ends proves its connection with a notified write.
void verify_pairs(std::vector<Connection>& servers, std::vector<Connection>& clients)
{
    REQUIRE(servers.size() == clients.size());
    std::vector<std::shared_ptr<MemoryRegion>> keep;
    // Every end offers 64 B and learns its peer's: client i's inbox at the
    // server is what it learnt (server ends and clients pair by the value each
    // client sends, not by index).
    std::vector<Connection*> ends;
    std::vector<RemoteRegion> offers;
    for (auto* side : {&servers, &clients})
        for (auto& end : *side) {
            ends.push_back(&end);
            offers.push_back(keep.emplace_back(end.allocate(64, Access::remote_write))->remote());
        }
    const auto learnt = test::exchange_all(ends, offers);
    const std::vector<RemoteRegion> at_server(
        learnt.begin() + static_cast<std::ptrdiff_t>(servers.size()), learnt.end());
    std::set<std::uint32_t> seen;
    {
        // The server ends are passive targets: on a provider that moves data
        // only while both ends read their queues (ofi_rxm's connection set-up,
        // Progress::polling), they poll too, here in a thread of their own.
        const test::Target passive([&](const std::atomic<bool>& written) {
            while (!written)
                for (auto& s : servers)
                    s.endpoint().progress();
        });
        for (std::size_t i = 0; i < clients.size(); ++i) {
            auto src = keep.emplace_back(clients[i].allocate(8, Access::local));
            int ctx = 0;
            clients[i].write_notify(src->slice(0, 8), at_server[i], 0,
                                    100 + static_cast<std::uint32_t>(i), &ctx);
            (void)clients[i].endpoint().wait(&ctx, soon());
        }
    } // the passive ends stop here
    for (auto& s : servers)
        seen.insert(s.endpoint().wait_for(Op::notify, soon()).data);
    CHECK(seen.size() == clients.size());
    // Close the clients first: the server's regions outlive their endpoints.
    clients.clear();
    servers.clear();
}

} // namespace

TEST_CASE("server: idle and garbage connections do not hold up real clients",
          "[server][accept][bad-input]")
{
    WEFT_EACH_CELL(c);
    Options o = test::options_for(c);
    o.handshake_timeout = 60s; // strangers outlast the whole test
    Server server(o, test::test_address(), 0);
    std::vector<test::Stranger> strangers;
    for (int i = 0; i < 100; ++i)
        strangers.emplace_back(server.port(), test::test_address()); // says nothing
    for (int i = 0; i < 100; ++i) {
        strangers.emplace_back(server.port(), test::test_address()).say(i % 2 ? "GET / HTTP/1.0\r\n\r\n"
                                                        : std::string(64, '\xff'));
    }
    std::vector<Connection> accepted;
    std::string server_error;
    std::thread acceptor([&] {
        try {
            while (accepted.size() < 8)
                accepted.push_back(server.accept(Deadline::after(60s)));
        } catch (const std::exception& e) {
            server_error = e.what();
        }
    });
    std::vector<Connection> clients;
    std::vector<double> seconds;
    try {
        seconds = connect_clients(server, o, 8, clients);
    } catch (...) {
        acceptor.join();
        throw;
    }
    acceptor.join();
    REQUIRE(server_error.empty());
    std::string times;
    for (double s : seconds)
        times += fmt::format(" {:.3f}", s);
    WARN(c.label() << ": 8 clients behind 200 strangers connected in (s):" << times);
    verify_pairs(accepted, clients);
    // The garbage was named and counted; the idle strangers are still pending.
    const auto rejected = server.rejections();
    CHECK(rejected.count >= 100);
    REQUIRE(!rejected.recent.empty());
    CHECK_THAT(rejected.recent.back(), Catch::Contains("is not a weft peer"));
}

TEST_CASE("server: several threads accept at once, each client exactly once",
          "[server][accept][threads]")
{
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    Server server(o, test::test_address(), 0);
    std::mutex m;
    std::vector<Connection> accepted;
    std::vector<std::string> errors;
    std::vector<std::thread> acceptors;
    for (int t = 0; t < 4; ++t)
        acceptors.emplace_back([&] {
            try {
                for (int k = 0; k < 2; ++k) {
                    Connection conn = server.accept(Deadline::after(60s));
                    const std::lock_guard lock(m);
                    accepted.push_back(std::move(conn));
                }
            } catch (const std::exception& e) {
                const std::lock_guard lock(m);
                errors.push_back(e.what());
            }
        });
    std::vector<Connection> clients;
    try {
        (void)connect_clients(server, o, 8, clients);
    } catch (...) {
        for (auto& t : acceptors)
            t.join();
        throw;
    }
    for (auto& t : acceptors)
        t.join();
    INFO("first error: " << (errors.empty() ? "" : errors.front()));
    REQUIRE(errors.empty());
    CHECK(server.rejections().count == 0);
    verify_pairs(accepted, clients);
}

TEST_CASE("server: a moved-from Server or Connection throws UsageError",
          "[server][bad-input]")
{
    const Options o = test::options_for({"tcp", EndpointKind::msg});
    WEFT_REQUIRE_CELL((test::Case{"tcp", EndpointKind::msg}));
    Server a(o, test::test_address(), 0);
    Server b = std::move(a);
    CHECK_THROWS_AS(a.accept(Deadline::after(1s)), UsageError); // NOLINT(bugprone-use-after-move)
    CHECK_THROWS_AS(a.port(), UsageError);
    auto p = test::connect_pair(b, o);
    Connection moved = std::move(p.client);
    auto mr = moved.allocate(64, Access::local);
    auto target = p.expose(64, Access::remote_write);
    int ctx = 0;
    // NOLINTBEGIN(bugprone-use-after-move)
    CHECK_THROWS_AS(p.client.write(mr->slice(0, 8), target->remote(), 0, &ctx), UsageError);
    CHECK_THROWS_AS(p.client.endpoint(), UsageError);
    CHECK_THROWS_AS(p.client.barrier(Deadline::after(1s)), UsageError);
    CHECK_THROWS_AS(p.client.allocate(64, Access::local), UsageError);
    // NOLINTEND(bugprone-use-after-move)
    moved.write(mr->slice(0, 8), target->remote(), 0, &ctx);
    (void)moved.endpoint().wait(&ctx, soon());
}

TEST_CASE("server: a client's wish that the server overrides is named", "[server][select]")
{
    const test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    Server server(test::options_for(c), test::test_address(), 0); // provider tcp, explicitly
    // Capture this process's stderr while the client connects.
    char path[] = "/tmp/weft-stderr-XXXXXX";
    const int capture = ::mkstemp(path);
    REQUIRE(capture >= 0);
    const int saved = ::dup(2);
    ::dup2(capture, 2);
    ::setenv("WEFT_PROVIDER", "sockets", 1);
    std::string error;
    try {
        Options client;
        client.allow_shm = true;
        client.node = test::test_address();
        auto accepted = std::async(std::launch::async, [&] { return server.accept(soon()); });
        auto conn = Connection::connect(test::at(server.port()), client, soon());
        (void)accepted.get();
    } catch (const std::exception& e) {
        error = e.what();
    }
    ::unsetenv("WEFT_PROVIDER");
    ::dup2(saved, 2);
    ::close(saved);
    std::string said(4096, '\0');
    said.resize(static_cast<std::size_t>(::pread(capture, said.data(), said.size(), 0)));
    ::close(capture);
    ::unlink(path);
    REQUIRE(error.empty());
    CHECK_THAT(said, Catch::Contains("WEFT_PROVIDER=sockets on this side is not used: the server "
                                     "chose tcp"));
    CHECK_THAT(said, Catch::Contains("allows shared memory"));
}

TEST_CASE("server: a loop that only polls learns that a client left, and try_accept takes the "
          "next without waiting",
          "[server][accept][process]")
{
    // A service's loop (the KV server's): try_accept and poll, nothing else. On RDM
    // only the client's side channel says it left; the poll looks at it.
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    Server server(o, test::test_address(), 0);
    CHECK_FALSE(server.try_accept()); // nobody yet: none, at once
    auto client = std::async(std::launch::async, [&] {
        return Connection::connect(test::at(server.port()), o, soon(60s));
    });
    std::optional<Connection> accepted;
    for (const Deadline until = soon(60s); !accepted && !until.expired();)
        accepted = server.try_accept();
    REQUIRE(accepted);
    {
        const Connection gone = client.get(); // the client goes at the end of this scope
    }
    Node& node = accepted->node();
    const Deadline until = soon(20s);
    while (!node.is_lost(accepted->peer_id()) && !until.expired()) {
        Completion got[4];
        (void)node.poll(got);
    }
    CHECK(node.is_lost(accepted->peer_id()));
}
