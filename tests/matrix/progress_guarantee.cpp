// SPDX-License-Identifier: MIT
// The progress guarantee: a passive RMA target never stalls the initiator.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

#include "support/cases.hpp"
#include "support/pattern.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

TEST_CASE("progress: a passive target never stalls the initiator", "[matrix][progress]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c); // Progress::automatic
    auto [target, remote, src, back] = p.rma(1 << 16);
    int ctx = 0;
    // From here on nobody touches the server's endpoint.
    for (int i = 0; i < 30; ++i) {
        const std::size_t n = 1024u << (i % 6);
        test::fill_pattern(src->bytes(), static_cast<std::uint64_t>(i));
        p.client.write(src->slice(0, n), remote, 0, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        p.client.read(back->slice(0, n), remote, 0, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        REQUIRE(std::memcmp(back->data(), src->data(), n) == 0);
    }
    Endpoint& passive = p.server.endpoint();
    if (passive.quirks().target_needs_progress) {
        CHECK(passive.progress_thread());
        CHECK(passive.progress_drives() > 0);
    } else {
        CHECK_FALSE(passive.progress_thread());
    }
}

TEST_CASE("progress: without anyone driving it, a passive target stalls (control)", "[progress]")
{
    // Proves the guarantee above is not vacuous: on tcp, tcp;ofi_rxm and net,
    // an unpolled target with Progress::polling never answers a read.
    const auto c = GENERATE(test::Case{"tcp", EndpointKind::msg},
                            test::Case{"tcp;ofi_rxm", EndpointKind::rdm},
                            test::Case{"net", EndpointKind::rdm});
    Options o;
    o.progress = Progress::polling;
    WEFT_REQUIRE_CELL(c, o);
    INFO(c.label());
    auto p = test::connect_pair(c, o);
    CHECK_FALSE(p.server.endpoint().progress_thread());
    auto target = p.expose(4096, Access::remote_read);
    auto sink = p.client.allocate(4096, Access::local);
    int ctx = 0;
    p.client.endpoint().set_post_timeout(2s);
    bool posted = false;
    try {
        // RDM endpoints connect on first use: the post itself waits for a target
        // that never answers.
        p.client.read(sink->all(), target->remote(), 0, &ctx);
        posted = true;
        (void)p.client.endpoint().wait(&ctx, Deadline::after(2s));
        FAIL("the read completed without any progress at the target");
    } catch (const TimeoutError& e) {
        CHECK_THAT(e.what(), Catch::Contains("progress thread") && Catch::Contains("poll"));
    }
    // Once the target polls, the (re-posted) read completes.
    test::Target target_poller([&](const std::atomic<bool>& stop) {
        while (!stop)
            (void)p.server.endpoint().poll_one();
    });
    p.client.endpoint().set_post_timeout(20s);
    if (!posted)
        p.client.read(sink->all(), target->remote(), 0, &ctx);
    CHECK(p.client.endpoint().wait(&ctx, soon()).context == &ctx);
    CHECK(target_poller.finish().empty());
}

TEST_CASE("progress: on shm a read of several ranges waits for the target, a read of one "
          "does not (Quirks::ranges_wait_for_target)",
          "[progress][sg]")
{
    const test::Case c{"shm", EndpointKind::rdm};
    Options o;
    o.progress = Progress::polling;
    WEFT_REQUIRE_CELL(c, o);
    auto p = test::connect_pair(c, o);
    REQUIRE(p.client.endpoint().quirks().ranges_wait_for_target);
    REQUIRE(p.client.endpoint().read_ranges_limit() >= 2);
    auto target = p.expose(1 << 16, Access::remote_read);
    test::fill_pattern(target->bytes(), 21);
    auto sink = p.client.allocate(1 << 16, Access::local);
    int ctx = 0;
    { // the peers' first exchange (shm maps the peer's region) needs the server
        test::Target warm_up([&](const std::atomic<bool>& stop) {
            while (!stop)
                (void)p.server.endpoint().poll_one();
        });
        p.client.read(sink->slice(0, 64), target->remote(), 0, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        REQUIRE(warm_up.finish().empty());
    }
    // From here on nobody polls the server: one range is the client's own
    // system call.
    const Endpoint::Read one[] = {{sink->slice(0, 4096), 8192}};
    p.client.endpoint().read_ranges(one, target->remote(), &ctx, p.client.peer());
    CHECK(p.client.endpoint().wait(&ctx, Deadline::after(5s)).context == &ctx);
    REQUIRE(std::memcmp(sink->data(), target->data() + 8192, 4096) == 0);
    // Two ranges go through the server's queue: nothing until it polls.
    const Endpoint::Read two[] = {{sink->slice(0, 100), 300}, {sink->slice(5000, 200), 40000}};
    p.client.endpoint().read_ranges(two, target->remote(), &ctx, p.client.peer());
    CHECK_THROWS_AS(p.client.endpoint().wait(&ctx, Deadline::after(300ms)), TimeoutError);
    test::Target target_poller([&](const std::atomic<bool>& stop) {
        while (!stop)
            (void)p.server.endpoint().poll_one();
    });
    CHECK(p.client.endpoint().wait(&ctx, soon()).context == &ctx);
    CHECK(target_poller.finish().empty());
    CHECK(std::memcmp(sink->data(), target->data() + 300, 100) == 0);
    CHECK(std::memcmp(sink->data() + 5000, target->data() + 40000, 200) == 0);
}

TEST_CASE("progress: a Node whose only connection closed still answers its next peer's reads "
          "with nobody polling it",
          "[matrix][progress][node]")
{
    // MSG: a Node's last endpoint closing stops the queue's progress thread; the next
    // peer's endpoint needs one again (without, a parameter server's workers waited
    // for their reads until their deadline while it sat in a barrier).
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto server = Node::open(o);
    auto memory = server->allocate(4096, Access::remote_read);
    test::fill_pattern(memory->bytes(), 11);
    for (int round = 0; round < 2; ++round) {
        INFO(c.label() << ", peer " << round);
        auto peer = test::peers_of(*server, o, 1);
        Node& p = *peer.nodes[0];
        {
            test::Target serve([&](const std::atomic<bool>& connected) {
                while (!connected)
                    server->progress();
            });
            p.connect(p.add_peer(server->address()), soon());
            REQUIRE(serve.finish().empty());
        }
        // From here on nobody touches the server.
        auto sink = p.allocate(4096, Access::local);
        int ctx = 0;
        p.read(p.peers().front(), sink->all(), memory->remote(), 0, &ctx);
        CHECK(p.wait(&ctx, Deadline::after(10s)).op == Op::read);
        CHECK(std::memcmp(sink->data(), memory->data(), 4096) == 0);
        server->remove_peer(peer.ids[0]); // MSG: its connection was the Node's only endpoint
    }
}

TEST_CASE("progress: Progress::thread runs one on any provider", "[progress]")
{
    test::Case c{"sockets", EndpointKind::msg};
    Options o;
    o.progress = Progress::thread;
    WEFT_REQUIRE_CELL(c, o);
    auto p = test::connect_pair(c, o);
    CHECK(p.server.endpoint().progress_thread());
    CHECK(p.server.selection().report().find("weft progress thread") != std::string::npos);
    auto target = p.expose(4096, Access::remote_read);
    auto sink = p.client.allocate(4096, Access::local);
    int ctx = 0;
    p.client.read(sink->all(), target->remote(), 0, &ctx);
    CHECK(p.client.endpoint().wait(&ctx, soon()).op == Op::read);
}
