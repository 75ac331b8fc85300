// SPDX-License-Identifier: MIT
// A Server's connections are peers of one Node: each Connection sees its own
// client's notifications and nobody else's, closing one ends that client
// only, and two threads on two Connections work or are refused, never crash.
#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "support/cases.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

struct Clients {
    std::vector<Connection> server_ends;
    std::vector<Connection> clients;
};

/// `n` clients connecting at once, each in a thread of its own, and their
/// server ends (in accept order, which is not the clients' order).
Clients connect_many(Server& server, const Options& o, int n)
{
    const Options co = test::client_options(server, o);
    std::vector<std::future<Connection>> pending;
    for (int i = 0; i < n; ++i)
        pending.push_back(std::async(std::launch::async, [&, port = server.port()] {
            return Connection::connect(test::at(port), co, soon(60s));
        }));
    Clients out;
    for (int i = 0; i < n; ++i)
        out.server_ends.push_back(server.accept(soon(60s)));
    for (auto& f : pending)
        out.clients.push_back(f.get());
    return out;
}

/// Each client exposes 4 KiB of its pattern (seed + index) for reading; each
/// server end learns the region of the client it is connected to.
std::vector<RemoteRegion> expose_clients(Clients& c,
                                         std::vector<std::shared_ptr<MemoryRegion>>& exposed,
                                         std::uint64_t seed)
{
    std::vector<Connection*> ends;
    std::vector<RemoteRegion> offers;
    for (std::size_t i = 0; i < c.clients.size(); ++i) {
        auto mr = exposed.emplace_back(c.clients[i].allocate(4096, Access::remote_read));
        test::fill_pattern(mr->bytes(), seed + i);
        ends.push_back(&c.clients[i]);
        offers.push_back(mr->remote());
    }
    for (auto& end : c.server_ends) {
        ends.push_back(&end);
        offers.push_back(exposed.emplace_back(end.allocate(8, Access::remote_read))->remote());
    }
    const auto learnt = test::exchange_all(ends, offers);
    return {learnt.begin() + static_cast<std::ptrdiff_t>(c.clients.size()), learnt.end()};
}

/// A Server and `n` clients; client i exposes 4 KiB of its pattern (seed + i)
/// and server end j has learnt its own client's region (theirs[j]).
struct Exposed {
    std::vector<std::shared_ptr<MemoryRegion>> regions; // outlive the connections
    Server server;
    Clients pair;
    std::vector<RemoteRegion> theirs;

    Exposed(const Options& o, int n, std::uint64_t seed)
        : server(o, test::test_address(), 0), pair(connect_many(server, o, n)),
          theirs(expose_clients(pair, regions, seed))
    {
    }
};

/// The passive side while server ends read their clients: a thread that
/// drives every client's Node until the test is done.
test::Target progress_all(std::vector<Connection>& clients)
{
    return test::Target([&clients](const std::atomic<bool>& done) {
        while (!done)
            for (auto& cl : clients)
                cl.node().progress();
    });
}

/// What a server end reads of its client's exposed 4096 B.
std::vector<std::byte> read_back(Connection& end, const RemoteRegion& theirs)
{
    auto sink = end.allocate(4096, Access::local);
    int ctx = 0;
    end.read(sink->slice(0, 4096), theirs, 0, &ctx);
    (void)end.wait(&ctx, soon());
    return std::vector<std::byte>(sink->data(), sink->data() + 4096);
}

constexpr std::uint32_t per_client = 64;

/// Client `id`'s k-th value: its id and the sequence number.
std::uint32_t value_of(std::size_t id, std::uint32_t k)
{
    return static_cast<std::uint32_t>((id + 1) * 1000 + k);
}

void every_notification_is_its_peers(const test::Case& c, int n)
{
    const Options o = test::options_for(c);
    std::vector<std::shared_ptr<MemoryRegion>> inbox; // outlives the connections
    Server server(o, test::test_address(), 0);
    auto [ends, clients] = connect_many(server, o, n);
    // Each server end exposes 64 slots; its client writes value k into slot k
    // and notifies k. A notification handed to the wrong Connection shows as
    // another client's id, or as a value its own slots do not hold.
    // A client that fails says so here at once: the server side would only
    // see its notifications missing, a minute later.
    std::mutex failed_mutex;
    std::string failed;
    std::vector<std::future<void>> writers;
    for (std::size_t i = 0; i < clients.size(); ++i)
        writers.push_back(std::async(std::launch::async, [&, i] {
            try {
                Connection& me = clients[i];
                auto src = me.allocate(8 * per_client, Access::remote_read);
                const RemoteRegion there = me.exchange(src->remote(), soon(60s));
                for (std::uint32_t k = 0; k < per_client; ++k) {
                    const std::uint64_t v = value_of(i, k);
                    std::memcpy(src->data() + 8 * k, &v, 8);
                    int ctx = 0;
                    me.write_notify(src->slice(8 * k, 8), there, 8 * k, value_of(i, k), &ctx);
                    (void)me.wait(&ctx, soon(60s));
                }
            } catch (const std::exception& e) {
                const std::lock_guard lock(failed_mutex);
                failed += fmt::format("client {} failed: {}\n", i, e.what());
                throw;
            }
        }));
    const auto clients_failed = [&] {
        const std::lock_guard lock(failed_mutex);
        return failed;
    };
    for (auto& end : ends) {
        auto& mr = inbox.emplace_back(end.allocate(8 * per_client, Access::remote_write));
        (void)end.exchange(mr->remote(), soon(60s));
    }
    // One thread drives every server end: waiting for one end's notifications
    // progresses the Node for all and keeps the others' for their Connections.
    std::set<std::size_t> ids;
    for (std::size_t j = 0; j < ends.size(); ++j) {
        INFO("server end " << j);
        std::optional<std::size_t> id;
        std::set<std::uint32_t> seqs;
        for (std::uint32_t k = 0; k < per_client; ++k) {
            Completion got;
            try {
                got = ends[j].wait_for(Op::notify, soon(60s));
            } catch (const Error&) {
                if (const std::string why = clients_failed(); !why.empty())
                    FAIL(why);
                throw;
            }
            const std::size_t from = got.data / 1000 - 1;
            const std::uint32_t seq = got.data % 1000;
            if (!id)
                id = from;
            REQUIRE(from == *id);          // one client's only
            REQUIRE(seq < per_client);
            REQUIRE(seqs.insert(seq).second);
            std::uint64_t landed = 0;
            std::memcpy(&landed, inbox[j]->data() + 8 * seq, 8);
            REQUIRE(landed == got.data);   // the client that wrote here
            CHECK(got.peer == ends[j].peer_id());
        }
        CHECK(ids.insert(*id).second);
    }
    for (auto& w : writers)
        w.get();
    CHECK(ids.size() == clients.size());
}

} // namespace

TEST_CASE("server: two and eight clients writing at once, each notification reaches its own "
          "Connection",
          "[server][notify][threads]")
{
    WEFT_EACH_CELL(c);
    for (const int n : {2, 8}) {
        INFO(n << " clients");
        every_notification_is_its_peers(c, n);
    }
}

TEST_CASE("server: closing one Connection ends that client only", "[server][close]")
{
    WEFT_EACH_CELL(c);
    // Pair the ends: each server end learns its client's region, and reads it.
    Exposed x(test::options_for(c), 3, 7);
    auto& [ends, clients] = x.pair;
    auto& theirs = x.theirs;
    const test::Target passive = progress_all(clients);
    auto read_all = [&](std::size_t j) { return read_back(ends[j], theirs[j]); };
    std::vector<std::vector<std::byte>> before;
    for (std::size_t j = 0; j < ends.size(); ++j)
        before.push_back(read_all(j));
    ends[1] = Connection(std::move(ends[2])); // the end at index 1 closes here
    theirs[1] = theirs[2];
    before[1] = before[2];
    ends.pop_back();
    theirs.pop_back();
    before.pop_back();
    for (int round = 0; round < 3; ++round)
        for (std::size_t j = 0; j < ends.size(); ++j) {
            INFO("end " << j << ", round " << round);
            CHECK(read_all(j) == before[j]);
        }
}

TEST_CASE("server: closing one client's endpoint is refused where the clients share it (RDM) "
          "and ends that client only where it is its own (MSG)",
          "[server][close]")
{
    WEFT_EACH_CELL(c);
    Exposed x(test::options_for(c), 3, 11);
    auto& [ends, clients] = x.pair;
    auto& theirs = x.theirs;
    const test::Target passive = progress_all(clients);
    auto read_all = [&](std::size_t j) { return read_back(ends[j], theirs[j]); };
    std::vector<std::vector<std::byte>> before;
    for (std::size_t j = 0; j < ends.size(); ++j)
        before.push_back(read_all(j));

    Endpoint& first = ends[0].endpoint();
    const bool shared = &first == &ends[1].endpoint();
    CHECK(shared == (c.kind == EndpointKind::rdm && &ends[0].node() == &ends[1].node()));
    if (shared) {
        CHECK_THROWS_WITH(first.close(), Catch::Contains("destroying its Connection") &&
                                             Catch::Contains("3 peers"));
        CHECK_FALSE(first.closed());
        for (std::size_t j = 0; j < ends.size(); ++j)
            CHECK(read_all(j) == before[j]); // every client still works
        ends[0] = Connection(std::move(ends[2])); // what the refusal says: close the Connection
        theirs[0] = theirs[2];
        before[0] = before[2];
        ends.pop_back();
        theirs.pop_back();
        before.pop_back();
    } else {
        first.close(); // its own endpoint (MSG, or shm's Node per connection): that client only
        CHECK(first.closed());
        auto sink = ends[0].allocate(64, Access::local);
        int ctx = 0;
        CHECK_THROWS_WITH(ends[0].read(sink->slice(0, 64), theirs[0], 0, &ctx),
                          Catch::Contains("closed"));
    }
    for (int round = 0; round < 3; ++round)
        for (std::size_t j = shared ? 0 : 1; j < ends.size(); ++j) {
            INFO("end " << j << ", round " << round);
            CHECK(read_all(j) == before[j]);
        }
}

TEST_CASE("server: two threads on two Connections of one Server work or are refused, never crash",
          "[server][threads]")
{
    WEFT_EACH_CELL(c);
    Exposed x(test::options_for(c), 2, 40);
    auto& [ends, clients] = x.pair;
    const auto& theirs = x.theirs;
    // The reference: what each end reads with nobody else in its Node.
    std::vector<std::vector<std::byte>> expected;
    std::vector<std::shared_ptr<MemoryRegion>> sinks;
    for (std::size_t j = 0; j < ends.size(); ++j) {
        sinks.push_back(ends[j].allocate(4096, Access::local));
        int ctx = 0;
        const test::Target passive = progress_all(clients);
        ends[j].read(sinks[j]->slice(0, 4096), theirs[j], 0, &ctx);
        (void)ends[j].wait(&ctx, soon());
        expected.emplace_back(sinks[j]->data(), sinks[j]->data() + 4096);
    }
    const test::Target passive = progress_all(clients);
    // Both ends at once, each from its own thread: a call either works or is
    // refused before it reaches the provider (UsageError, FI_EBUSY, naming
    // the rule); a refused call is made again until it goes through.
    std::atomic<std::uint64_t> refused{0};
    auto retry = [&](auto&& call) {
        for (;;) {
            try {
                return call();
            } catch (const UsageError& e) {
                if (e.code() != -FI_EBUSY ||
                    std::string_view(e.what()).find("one thread at a time") == std::string_view::npos)
                    throw;
                refused.fetch_add(1, std::memory_order_relaxed);
                std::this_thread::yield();
            }
        }
    };
    std::vector<std::future<int>> workers;
    for (std::size_t j = 0; j < ends.size(); ++j)
        workers.push_back(std::async(std::launch::async, [&, j] {
            int ok = 0;
            const auto stop = Clock::now() + 1s;
            while (Clock::now() < stop) {
                std::memset(sinks[j]->data(), 0, 4096);
                int ctx = 0;
                retry([&] { ends[j].read(sinks[j]->slice(0, 4096), theirs[j], 0, &ctx); });
                (void)retry([&] { return ends[j].wait(&ctx, soon()); });
                if (std::memcmp(sinks[j]->data(), expected[j].data(), 4096) != 0)
                    throw std::runtime_error(fmt::format("end {}: read the wrong bytes", j));
                ++ok;
            }
            return ok;
        }));
    for (auto& w : workers)
        CHECK(w.get() > 0);
    WARN(c.label() << ": " << refused.load() << " calls refused while both threads ran");
}

TEST_CASE("server: a client reaches two servers through one Node, with one registered buffer",
          "[server][node]")
{
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    std::vector<std::shared_ptr<MemoryRegion>> exposed; // outlive the connections
    Server a(o, test::test_address(), 0);
    Server b(o, test::test_address(), 0);
    Options co = o;
    co.provider = std::string(a.selection().provider());
    co.kind = a.selection().kind();
    auto node = Node::open(co);
    auto shared = exposed.emplace_back(node->allocate(4096, Access::remote_read));
    test::fill_pattern(shared->bytes(), 99);
    std::vector<Connection> ends;
    std::vector<Connection> mine;
    for (Server* s : {&a, &b}) {
        auto accepted = std::async(std::launch::async, [s] { return s->accept(soon()); });
        mine.push_back(Connection::connect(test::at(s->port()), co, soon(), node));
        ends.push_back(accepted.get());
    }
    CHECK(&mine[0].node() == &mine[1].node());
    // Each server reads the one buffer through its own connection.
    std::vector<Connection*> all{&mine[0], &mine[1], &ends[0], &ends[1]};
    std::vector<RemoteRegion> offers{shared->remote(), shared->remote()};
    for (auto& e : ends)
        offers.push_back(exposed.emplace_back(e.allocate(8, Access::remote_read))->remote());
    const auto learnt = test::exchange_all(all, offers);
    const std::vector<RemoteRegion> theirs(learnt.begin() + 2, learnt.end());
    const test::Target passive([&](const std::atomic<bool>& done) {
        while (!done)
            node->progress();
    });
    for (std::size_t j = 0; j < ends.size(); ++j) {
        INFO("server " << j);
        auto sink = ends[j].allocate(4096, Access::local);
        int ctx = 0;
        ends[j].read(sink->slice(0, 4096), theirs[j], 0, &ctx);
        (void)ends[j].wait(&ctx, soon());
        CHECK(std::memcmp(sink->data(), shared->data(), 4096) == 0);
    }
}

TEST_CASE("server: a Node cannot reach a server of another provider, and says why",
          "[server][node]")
{
    test::Case tcp{"tcp", EndpointKind::msg};
    test::Case rxm{"tcp;ofi_rxm", EndpointKind::rdm};
    WEFT_REQUIRE_CELL(tcp);
    WEFT_REQUIRE_CELL(rxm);
    Server server(test::options_for(rxm), test::test_address(), 0);
    auto node = Node::open(test::options_for(tcp));
    auto accepted = std::async(std::launch::async, [&] {
        try {
            (void)server.accept(Deadline::after(3s));
        } catch (const Error&) {
        }
    });
    try {
        (void)Connection::connect(test::at(server.port()), test::options_for(tcp), soon(), node);
        FAIL("a tcp MSG Node connected to a tcp;ofi_rxm server");
    } catch (const UsageError& e) {
        CHECK_THAT(e.what(), Catch::Contains("a Node reaches servers of its own provider"));
    }
    accepted.get();
    CHECK(node->peers().empty()); // nothing is left of the attempt
}
