// SPDX-License-Identifier: MIT
// Node: many peers on one domain and one queue, every completion a peer
// caused naming it, on every provider cell (MSG and RDM). Each Node is driven
// by one thread; peers are Nodes in other threads of this process.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <thread>

#include "support/cases.hpp"
#include "support/eventually.hpp"
#include "support/threads.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::on_threads;
using weft::test::soon;

namespace {

/// Client i's values, `rounds` of them, reached the server in order, each
/// named by the client's id there: the r-th is i << 16 | r.
void each_clients_values(std::map<std::uint32_t, std::vector<std::uint32_t>>& got,
                         const std::vector<PeerId>& ids, std::uint32_t rounds)
{
    for (std::size_t i = 0; i < ids.size(); ++i) {
        INFO("client " << i << " (server's peer " << ids[i].index << ")");
        const auto& values = got[ids[i].index];
        REQUIRE(values.size() == rounds);
        for (std::uint32_t r = 0; r < rounds; ++r)
            REQUIRE(values[r] == (static_cast<std::uint32_t>(i) << 16 | r));
    }
}

} // namespace

TEST_CASE("node: every notification names the peer that sent it", "[node][notify][threads]")
{
    WEFT_EACH_CELL(c);
    const std::size_t clients = GENERATE(2, 8);
    INFO(clients << " peers");
    const Options o = test::options_for(c);
    auto server = Node::open(o);
    constexpr std::size_t slot = 4096;
    constexpr std::uint32_t rounds = 50;
    auto inbox = server->allocate(clients * slot, Access::remote_write);
    const RemoteRegion at_server = inbox->remote();
    auto [nodes, at_server_id] = test::peers_of(*server, o, clients);
    std::map<std::uint32_t, std::vector<std::uint32_t>> got; // server id -> values
    test::Target target([&](const std::atomic<bool>& done) {
        for (std::size_t n = 0; n < clients * rounds; ++n) {
            const Completion note = server->wait_for(Op::notify, soon(60s));
            got[note.peer.index].push_back(note.data);
        }
        while (!done)
            server->progress(); // serve the last reads and hellos
    });
    {
        on_threads(clients, [&](std::size_t i) {
            Node& me = *nodes[i];
            const PeerId srv = me.add_peer(server->address());
            auto src = me.allocate(slot, Access::local);
            int ctx = 0;
            for (std::uint32_t r = 0; r < rounds; ++r) {
                test::fill_pattern(src->bytes(), i * 1000 + r);
                me.write_notify(srv, src->slice(0, slot), at_server, i * slot,
                                static_cast<std::uint32_t>(i << 16 | r), &ctx);
                (void)me.wait(&ctx, soon(60s));
            }
        });
    }
    REQUIRE(target.finish().empty());
    each_clients_values(got, at_server_id, rounds);
    for (std::size_t i = 0; i < clients; ++i) {
        INFO("client " << i);
        // The last write of each client is in its slot.
        std::vector<std::byte> want(slot);
        test::fill_pattern(want, i * 1000 + rounds - 1);
        CHECK(std::memcmp(inbox->data() + i * slot, want.data(), slot) == 0);
    }
    nodes.clear(); // the clients first: the server's region outlives their endpoints
}

TEST_CASE("node: a Node that only polls accepts a peer that connects to it, and takes its "
          "notifications",
          "[node][notify][threads]")
{
    // A service's loop: poll() and nothing else (no wait, no progress). Its
    // fast path met the connecting peer's hello and never answered it.
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto server = Node::open(o);
    auto client = Node::open_like(o, server->address());
    auto inbox = server->allocate(4096, Access::remote_write);
    const PeerId client_at_server = server->add_peer(client->address());
    std::vector<Completion> notes; // the target's until finish()
    std::atomic<std::size_t> taken{0};
    test::Target target([&](const std::atomic<bool>& done) {
        const Deadline until = soon(60s);
        while (!done && !until.expired()) {
            Completion got[8];
            for (const Completion& n : std::span(got, server->poll(got)))
                if (n.op == Op::notify) {
                    notes.push_back(n);
                    ++taken;
                }
        }
    });
    {
        const PeerId srv = client->add_peer(server->address());
        auto src = client->allocate(4096, Access::local);
        int ctx = 0;
        for (std::uint32_t r = 0; r < 3; ++r) {
            client->write_notify(srv, src->slice(0, 4096), inbox->remote(), 0, r, &ctx);
            (void)client->wait(&ctx, soon(20s));
        }
        // The target has them once its poll took them.
        (void)test::eventually(soon(20s), [&] { return taken >= 3; });
    }
    REQUIRE(target.finish().empty());
    REQUIRE(notes.size() == 3);
    for (std::uint32_t r = 0; r < 3; ++r) {
        CHECK(notes[r].data == r);
        CHECK(notes[r].peer == client_at_server);
    }
}

TEST_CASE("node: unknown and removed peers are refused before any traffic",
          "[node][bad-input]")
{
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto a = Node::open(o);
    auto b = Node::open_like(o, a->address());
    auto src = a->allocate(64, Access::local);
    auto target = b->allocate(64, Access::remote_write);
    int ctx = 0;
    CHECK_THROWS_AS(a->write(PeerId{7}, src->slice(0, 8), target->remote(), 0, &ctx), UsageError);
    const PeerId p = a->add_peer(b->address());
    CHECK(a->add_peer(b->address()) == p); // the same Node twice: the same peer
    a->remove_peer(p);
    CHECK_THROWS_AS(a->write(p, src->slice(0, 8), target->remote(), 0, &ctx), UsageError);
    // Another provider's address is refused with both names.
    const NodeAddress other(a->kind(), a->provider() == "shm" ? "tcp" : "shm", 1, 1,
                            std::vector<std::byte>(16));
    CHECK_THROWS_AS(a->add_peer(other), UsageError);
    // A Node is not its own peer: refused at once, not "gone" at the first write.
    CHECK_THROWS_WITH(a->add_peer(a->address()), Catch::Contains("own address"));
}

TEST_CASE("node: every message names the peer that sent it", "[node][msg][threads]")
{
    WEFT_EACH_CELL(c);
    constexpr std::size_t clients = 4;
    constexpr std::uint32_t rounds = 40;
    const Options o = test::options_for(c);
    auto server = Node::open(o);
    auto [nodes, at_server_id] = test::peers_of(*server, o, clients);
    std::map<std::uint32_t, std::vector<std::uint32_t>> got;
    test::Target target([&](const std::atomic<bool>& done) {
        for (std::size_t n = 0; n < clients * rounds; ++n) {
            const Completion m = server->wait_for(Op::recv, soon(60s));
            std::uint32_t v = 0;
            std::memcpy(&v, m.message.data(), sizeof v);
            got[m.peer.index].push_back(v);
        }
        while (!done)
            server->progress();
    });
    {
        on_threads(clients, [&](std::size_t i) {
            Node& me = *nodes[i];
            const PeerId srv = me.add_peer(server->address());
            auto src = me.allocate(64, Access::local);
            int ctx = 0;
            for (std::uint32_t r = 0; r < rounds; ++r) {
                const std::uint32_t v = static_cast<std::uint32_t>(i << 16 | r);
                std::memcpy(src->data(), &v, sizeof v);
                me.send(srv, src->slice(0, 64), &ctx);
                (void)me.wait(&ctx, soon(60s));
            }
        });
    }
    REQUIRE(target.finish().empty());
    each_clients_values(got, at_server_id, rounds);
    nodes.clear();
}

TEST_CASE("node: 32 peers, one registered buffer used with all, every byte verified",
          "[node][rma][threads]")
{
    WEFT_EACH_CELL(c);
    constexpr std::size_t peers = 32;
    constexpr std::size_t slot = 8192;
    const Options o = test::options_for(c);
    auto hub = Node::open(o);
    // One registration for every peer: each writes its slot, reads the common part.
    auto shared = hub->allocate(peers * slot + slot, Access::remote_read_write);
    test::fill_pattern(shared->bytes().last(slot), 77);
    const RemoteRegion region = shared->remote();
    auto nodes = test::peers_of(*hub, o, peers).nodes;
    test::Target serve([&](const std::atomic<bool>& done) {
        while (!done)
            hub->progress(); // a passive target that accepts and progresses
    });
    {
        // 4 threads, 8 Nodes each: a thread drives its Nodes one after another.
        on_threads(4, [&](std::size_t t) {
            for (std::size_t i = t; i < peers; i += 4) {
                Node& me = *nodes[i];
                const PeerId h = me.add_peer(hub->address());
                auto src = me.allocate(slot, Access::local);
                auto back = me.allocate(2 * slot, Access::local);
                test::fill_pattern(src->bytes(), 1000 + i);
                int ctx = 0;
                me.write(h, src->slice(0, slot), region, i * slot, &ctx);
                (void)me.wait(&ctx, soon(60s));
                me.read(h, back->slice(0, slot), region, i * slot, &ctx); // its own slot back
                (void)me.wait(&ctx, soon(60s));
                me.read(h, back->slice(slot, slot), region, peers * slot, &ctx); // the common part
                (void)me.wait(&ctx, soon(60s));
                REQUIRE(std::memcmp(back->data(), src->data(), slot) == 0);
                REQUIRE(std::memcmp(back->data() + slot, shared->data() + peers * slot, slot) == 0);
            }
        });
    }
    REQUIRE(serve.finish().empty());
    for (std::size_t i = 0; i < peers; ++i) {
        std::vector<std::byte> want(slot);
        test::fill_pattern(want, 1000 + i);
        REQUIRE(std::memcmp(shared->data() + i * slot, want.data(), slot) == 0);
    }
    nodes.clear();
}

TEST_CASE("node: peers of separate Nodes cannot reach each other's memory", "[node][security]")
{
    // Keys are domain-wide: a Node's region is reachable by every peer that
    // learns its descriptor. Peers that must be isolated get Nodes of their own.
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto for_a = Node::open(o); // a service's Node for client A
    auto for_b = Node::open_like(o, for_a->address()); // and another for client B
    if (for_a->domain()->quirks().keys_unchecked || for_a->domain()->quirks().remote_errors_silent) {
        WARN(c.label() << ": this provider does not refuse a foreign key (Quirks::keys_unchecked or remote_errors_silent): no isolation to test");
        return;
    }
    auto secret = for_a->allocate(4096, Access::remote_read);   // exported to A only
    auto visible = for_b->allocate(4096, Access::remote_read);  // exported to B
    auto client_b = Node::open_like(o, for_b->address());
    const PeerId b_side = client_b->add_peer(for_b->address());
    (void)for_b->add_peer(client_b->address());
    auto sink = client_b->allocate(4096, Access::local);
    test::Target serve([&](const std::atomic<bool>& done) {
        while (!done)
            for_b->progress();
    });
    int ctx = 0;
    // B reaches its own Node's region, and not A's, though it holds A's descriptor.
    std::string allowed_error;
    std::string refused;
    test::fill_pattern(visible->bytes(), 3);
    try {
        client_b->read(b_side, sink->slice(0, 64), visible->remote(), 0, &ctx);
        (void)client_b->wait(&ctx, soon());
    } catch (const Error& e) {
        allowed_error = e.what();
    }
    try {
        client_b->read(b_side, sink->slice(64, 64), secret->remote(), 0, &ctx);
        (void)client_b->wait(&ctx, soon());
    } catch (const Error& e) {
        refused = e.what();
    }
    REQUIRE(serve.finish().empty());
    INFO("own Node's region: " << allowed_error);
    REQUIRE(allowed_error.empty());
    CHECK(std::memcmp(sink->data(), visible->data(), 64) == 0);
    INFO("the other Node's region: " << refused);
    CHECK_FALSE(refused.empty());
}

TEST_CASE("node: a Node closed with messages it never read closes cleanly", "[node][msg][close]")
{
    // ofi_rxm (libfabric 1.17) handled such messages after closing their
    // connection and reposted their buffers on the freed endpoint: a crash in
    // fi_close on verbs, made certain by the lab's MALLOC_PERTURB_ (freed
    // memory overwritten). CompletionQueue::empty_out reads them first.
    WEFT_EACH_CELL(c);
    constexpr int unread = 4;
    const Options o = test::options_for(c);
    auto sender = Node::open(o);
    Options polled = o; // no progress thread that would read the messages
    polled.progress = Progress::polling;
    auto closer = Node::open_like(polled, sender->address());
    const PeerId to_sender = closer->add_peer(sender->address());
    const PeerId to_closer = sender->add_peer(closer->address());
    std::atomic<bool> sent{false};
    test::Target target([&](const std::atomic<bool>& done) {
        (void)sender->wait_for(Op::recv, to_closer, soon(60s)); // the closer's hello
        auto src = sender->allocate(64, Access::local);
        std::array<int, unread> ctx{};
        for (int i = 0; i < unread; ++i)
            sender->send(to_closer, src->slice(0, 64), &ctx[i]);
        for (auto& x : ctx)
            (void)sender->wait(&x, soon(60s)); // in the closer's queue
        sent = true;
        while (!done)
            sender->progress(); // the closer's departure may show here
    });
    auto hello = closer->allocate(64, Access::local);
    int ctx = 0;
    closer->send(to_sender, hello->slice(0, 64), &ctx); // iWARP: the initiator speaks first
    (void)closer->wait(&ctx, soon(60s));
    // Not reading its queue meanwhile. Where a send completes only once the
    // receiver has acknowledged it (ofi_rxd), the closer progresses after a
    // second, and the messages wait unread in weft's queue instead.
    const auto quiet = soon(1s);
    const auto until = soon(60s);
    while (!sent && !until.expired()) {
        if (quiet.expired())
            closer->progress();
        else
            std::this_thread::sleep_for(1ms);
    }
    REQUIRE(sent);
    std::this_thread::sleep_for(50ms);
    hello.reset();
    closer.reset(); // with 4 messages unread
    REQUIRE(target.finish().empty());
}
