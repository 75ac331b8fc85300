// SPDX-License-Identifier: MIT
// Faults with real processes: a peer killed with SIGKILL mid-stream, a server
// that restarts, a server that is not there. The survivor gets a clear error
// within seconds, releases everything (the FidLeakCheck listener checks) and
// carries on with a new peer.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <unistd.h>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/eventually.hpp"
#include "support/sockets.hpp"
#include "support/test_peer.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

namespace {


/// Writes 64 KiB and reads it back; true when the bytes came back intact.
/// Throws weft::Error on a fault.
[[nodiscard]] bool verified_round(Connection& c, MemoryRegion& src, MemoryRegion& sink,
                                  const RemoteRegion& dst, std::uint64_t seed,
                                  std::chrono::seconds wait = 20s)
{
    constexpr std::size_t n = 65536;
    const std::uint64_t off = (seed * n) % (dst.length() - n);
    test::fill_pattern(src.bytes().first(n), seed);
    int ctx = 0;
    c.write(src.slice(0, n), dst, off, &ctx);
    (void)c.wait(&ctx, Deadline::after(wait));
    c.read(sink.slice(0, n), dst, off, &ctx);
    (void)c.wait(&ctx, Deadline::after(wait));
    return std::memcmp(sink.data(), src.data(), n) == 0;
}

} // namespace

TEST_CASE("faults: a peer killed mid-stream: the initiator gets a clear error in seconds, then "
          "works with a new peer",
          "[faults][process]")
{
    WEFT_EACH_CELL(c);
    {
        auto peer = test::test_peer_server(c);
        // The stream runs on its own thread, which owns what it touches: on
        // shm, a peer killed while it held the lock of its shared queue leaves
        // libfabric 1.17 spinning forever in the initiator's next call
        // (measured; providers/QUIRKS.md). No deadline can reach a thread
        // inside the provider, so the test tells that case from a hang of
        // weft's own and keeps the stuck thread's objects alive for good.
        struct Stream {
            std::vector<std::shared_ptr<MemoryRegion>> held; // regions outlive the connection
            std::optional<Connection> conn;
            RemoteRegion remote;
            Clock::time_point started, failed_at;
            std::string error;
            bool lost = false;
            std::exception_ptr other;
            bool intact = true;
            std::atomic<std::uint64_t> rounds{0};
            std::atomic<bool> done{false};
        };
        auto s = std::make_shared<Stream>();
        s->conn.emplace(test::connect_to(peer));
        auto src = s->held.emplace_back(s->conn->allocate(1u << 20, Access::remote_write));
        auto sink = s->held.emplace_back(s->conn->allocate(1u << 20, Access::remote_write));
        s->remote = s->conn->exchange(sink->remote(), soon());
        for (std::uint64_t i = 0; i < 8; ++i)
            REQUIRE(verified_round(*s->conn, *src, *sink, s->remote, i));

        // Keep streaming while the peer dies; every wait has a 5 s deadline.
        s->started = Clock::now();
        std::thread streamer([s, src, sink] {
            try {
                for (std::uint64_t i = 8; Clock::now() - s->started < 60s && s->intact; ++i) {
                    s->intact = verified_round(*s->conn, *src, *sink, s->remote, i, 5s);
                    s->rounds.fetch_add(1, std::memory_order_relaxed);
                }
            } catch (const Error& e) {
                s->error = e.what();
                s->lost = e.peer_lost();
                s->failed_at = Clock::now();
            } catch (...) {
                s->other = std::current_exception();
            }
            s->done.store(true, std::memory_order_release);
        });
        std::this_thread::sleep_for(200ms);
        peer.kill_now();
        // A weft wait ends within 5 s, a post's retries within 10 s: a stream
        // that made no round for 25 s is inside the provider for good.
        std::uint64_t seen = s->rounds.load();
        auto last_round = Clock::now();
        while (!s->done.load(std::memory_order_acquire) && Clock::now() - last_round < 25s) {
            std::this_thread::sleep_for(10ms);
            if (const auto r = s->rounds.load(); r != seen) {
                seen = r;
                last_round = Clock::now();
            }
        }
        if (!s->done.load(std::memory_order_acquire)) {
            streamer.detach();
            test::bury(s);
            INFO(c.label() << ": the stream made no round for 25 s after the peer was killed");
            REQUIRE(s->conn->endpoint().quirks().dead_peer_can_hang_calls);
            WARN(c.label() << ": libfabric's shm spins on the lock the killed peer held "
                              "(documented defect); the stuck connection is left open");
        } else {
            streamer.join();
            if (s->other)
                std::rethrow_exception(s->other);
            INFO("error: " << s->error);
            REQUIRE(s->intact);
            REQUIRE_FALSE(s->error.empty());
            CHECK(s->lost); // a killed peer is lost, not a refused access
            const auto after_kill = s->failed_at - (s->started + 200ms);
            // "Within seconds": a wait's 5 s, or the 10 s a post may retry a full
            // queue (ofi_rxm keeps reconnecting to the dead peer), whichever ends it.
            CHECK(after_kill < 20s);
            WARN(c.label() << ": killed peer reported "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(after_kill).count()
                           << " ms after SIGKILL: " << s->error);
        }
    } // everything released here: the listener checks no fid is left open

    // The survivor is not poisoned: a new peer, a new connection, verified data.
    auto again = test::test_peer_server(c);
    std::vector<std::shared_ptr<MemoryRegion>> held;
    Connection conn = test::connect_to(again);
    auto src = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    auto sink = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    const RemoteRegion remote = conn.exchange(sink->remote(), soon());
    for (std::uint64_t i = 0; i < 4; ++i)
        REQUIRE(verified_round(conn, *src, *sink, remote, 100 + i));
    again.kill_now(); // it would wait for commands
}

TEST_CASE("faults: shm regions of killed processes are swept, and a reused PID cannot block a new "
          "endpoint",
          "[faults][process][shm]")
{
    const test::Case c{"shm", EndpointKind::rdm};
    WEFT_REQUIRE_CELL(c);
    // weft's regions are /dev/shm/weft.NS.PID.START.N.
    const auto regions_of = [](long pid) {
        std::size_t n = 0;
        std::error_code ec;
        const auto tag = fmt::format(".{}.", pid);
        for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
            const auto name = e.path().filename().string();
            n += name.rfind("weft.", 0) == 0 && name.find(tag) != std::string::npos;
        }
        return n;
    };
    auto peer = test::test_peer_server(c);
    const long dead = peer.pid();
    REQUIRE(regions_of(dead) >= 1);
    peer.kill_now();
    REQUIRE(regions_of(dead) >= 1); // SIGKILL leaves a process's regions behind

    // A dead process that had this process's PID left libfabric's default
    // names behind ("PID:DOMAIN:EP", 16 MiB each): they made fi_enable fail
    // with -FI_EBUSY before weft named its regions itself.
    std::vector<std::string> stale;
    for (int d = 0; d < 16; ++d)
        for (int e = 0; e < 16; ++e) {
            auto path = fmt::format("/dev/shm/{}:{}:{}", ::getpid(), d, e);
            if (std::FILE* f = std::fopen(path.c_str(), "wx")) {
                std::fclose(f);
                stale.push_back(std::move(path));
            }
        }
    struct Remove {
        std::vector<std::string>& paths;
        ~Remove()
        {
            for (const auto& p : paths)
                std::remove(p.c_str());
        }
    } remove_stale{stale};

    auto again = test::test_peer_server(c);
    std::vector<std::shared_ptr<MemoryRegion>> held;
    Connection conn = test::connect_to(again);
    CHECK(regions_of(dead) == 0); // opening an shm endpoint swept the dead peer's
    auto src = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    auto sink = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    const RemoteRegion remote = conn.exchange(sink->remote(), soon());
    REQUIRE(verified_round(conn, *src, *sink, remote, 7));
    again.kill_now(); // it would wait for commands
}

TEST_CASE("faults: a client killed mid-stream: the server notices and accepts the next one",
          "[faults][process]")
{
    WEFT_EACH_CELL(c);
    Server server(test::options_for(c, test::test_peer_options()), test::test_address(), 0);
    std::vector<std::shared_ptr<MemoryRegion>> exposed; // outlive their connections
    for (int round = 0; round < 2; ++round) {
        INFO("client " << round);
        std::optional<test::PeerProcess> client;
        Connection conn =
            test::accept_streaming(server, c, client, exposed, 8u << 20, Access::remote_read_write);
        // The client writes into its target; see data arrive while driving progress.
        const std::byte* target = exposed.back()->data();
        REQUIRE(test::eventually(
            Deadline::after(20s), [&] { return !test::all_equal(target, 65536, std::byte{0}); },
            [&] { (void)conn.endpoint().poll_one(); }));
        client->kill_now();
        const auto killed = Clock::now();
        // A passive target learns of it on the side channel: a clear error,
        // soon. Not by polling the endpoint: on shm, a peer killed while it
        // held the lock of this endpoint's shared queue leaves libfabric
        // spinning forever in the next poll (measured); the Server abandons
        // such an endpoint when it drops it (Endpoint::abandoned()).
        std::string error;
        try {
            while (!conn.side().readable(1ms))
                REQUIRE(Clock::now() - killed < 10s);
            (void)conn.side().receive(detail::Frame::data, soon());
        } catch (const Error& e) {
            error = e.what();
        }
        CHECK_THAT(error, Catch::Contains("closed the side channel"));
        CHECK(Clock::now() - killed < 10s);
    }
}

TEST_CASE("faults: a region dropped while a killed client's writes are still queued is never "
          "written after it is freed",
          "[faults][process]")
{
    // Software providers carry an RMA write out on the target's side, as its
    // packets are read (after the key was checked once per operation): a
    // killed client's writes still queued at this side land when this side
    // next progresses, even after the region's registration is closed. Here
    // nobody progresses while they queue up; then the client is killed, the
    // region dropped, and the server closed (which reads its queue empty).
    // Before weft kept such memory until its endpoints closed, the provider
    // wrote into freed memory (ASan: heap-use-after-free; without: SIGSEGV).
    WEFT_EACH_CELL(c);
    Options o = test::options_for(c, test::test_peer_options());
    o.progress = Progress::polling; // no weft thread reads the queue meanwhile
    std::optional<Server> server;
    server.emplace(o, test::test_address(), 0);
    std::vector<std::shared_ptr<MemoryRegion>> exposed;
    std::optional<test::PeerProcess> client;
    {
        Connection conn = test::accept_streaming(*server, c, client, exposed, 8u << 20,
                                                 Access::remote_read_write);
        const std::byte* target = exposed.back()->data();
        REQUIRE(test::eventually(
            Deadline::after(20s), [&] { return !test::all_equal(target, 65536, std::byte{0}); },
            [&] { (void)conn.endpoint().poll_one(); }));
        std::this_thread::sleep_for(300ms); // its writes queue up unread here
        client->kill_now();
    }
    exposed.clear();
    // What the provider does with the queued writes now must not touch the
    // freed region.
    CHECK_NOTHROW(server.reset());
}

TEST_CASE("faults: a restarted server: an opted-in client reconnects and resumes, others get a "
          "clear error",
          "[faults][process][reconnect]")
{
    // One provider per endpoint kind is enough: reconnecting is bootstrap logic.
    const auto c = test::each_cell();
    if (c.provider != "tcp" && c.provider != "tcp;ofi_rxm" && c.provider != "verbs")
        return;
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    const std::uint16_t port = test::free_port(test::test_address());
    const std::string where = test::at(port);
    Options opted = test::test_peer_options();
    opted.retry.reconnect = true;
    opted.retry.initial = 20ms;
    opted.retry.max = 200ms;
    Options plain = test::test_peer_options();

    std::optional<test::PeerProcess> server;
    server.emplace(test::test_peer_server(c, port));
    std::vector<std::shared_ptr<MemoryRegion>> held; // regions outlive the connection
    Connection conn = Connection::connect(where, opted, soon());
    auto src = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    auto sink = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    RemoteRegion remote = conn.exchange(sink->remote(), soon());
    REQUIRE(verified_round(conn, *src, *sink, remote, 1));

    server->kill_now();
    server.reset();
    CHECK_THROWS_AS(verified_round(conn, *src, *sink, remote, 2, 5s), Error);

    // The server comes back on the same port after a while; the client retries
    // with backoff meanwhile.
    test::PeerLauncher restart(server, WEFT_TEST_PEER_PATH,
                               test::test_peer_args(c, {std::to_string(port)}), 700ms);
    conn.reconnect(soon(30s));
    restart.join();
    CHECK(conn.reconnects() == 1);
    // Resume: new domain, so new registrations and a new exchange.
    src = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    sink = held.emplace_back(conn.allocate(1u << 20, Access::remote_write));
    remote = conn.exchange(sink->remote(), soon());
    for (std::uint64_t i = 0; i < 4; ++i)
        REQUIRE(verified_round(conn, *src, *sink, remote, 10 + i));

    // A client that did not opt in is told so, with the fix.
    server->kill_now();
    server.reset();
    server.emplace(test::test_peer_server(c, port));
    Connection other = Connection::connect(where, plain, soon());
    CHECK_THROWS_WITH(other.reconnect(soon()), Catch::Contains("Options::retry.reconnect"));
    server->kill_now();
}

TEST_CASE("faults: nobody at the address: retried per policy, then a clear error",
          "[faults][reconnect]")
{
    const std::uint16_t port = test::free_port(test::test_address()); // nothing listens there
    RetryPolicy policy;
    policy.attempts = 4;
    policy.initial = 50ms;
    policy.max = 100ms;
    const auto start = Clock::now();
    try {
        (void)SideChannel::connect(test::test_address(), port, soon(), {}, policy);
        FAIL("connected to nothing");
    } catch (const Error& e) {
        CHECK(e.code() == -FI_ECONNREFUSED);
        CHECK_THAT(e.what(), Catch::Contains("4 attempts") && Catch::Contains("refused") &&
                                 Catch::Contains("is the server running"));
    }
    const auto took = Clock::now() - start;
    CHECK(took >= 50ms + 100ms + 100ms); // it did back off between attempts
    CHECK(took < 5s);
    // Through Connection::connect, the same policy applies.
    Options o;
    o.retry = policy;
    CHECK_THROWS_WITH(Connection::connect(test::at(port), o, soon()),
                      Catch::Contains("4 attempts"));
}
