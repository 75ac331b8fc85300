// SPDX-License-Identifier: MIT
// A Node's queue as a service meets it: a poll never stops in front of the caller's
// completions (weft's own entries before them are read past), and a flush is per peer:
// on one RDM endpoint serving many peers, a flush to one says nothing of the writes to
// another, and a read from that other still waits behind them. On shm a read overtakes a
// write queued at its target (QUIRKS.md); the passive targets here never progress, so a
// read that was not flushed first sees old bytes.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "support/cases.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

TEST_CASE("node: a flush to one peer leaves a read from another behind that one's writes",
          "[node][flush]")
{
    WEFT_EACH_CELL(c);
    Options o = test::options_for(c);
    o.progress = Progress::polling; // the targets never progress: nothing drives their queues
    auto me = Node::open(o);
    auto a = Node::open_like(o, me->address());
    auto b = Node::open_like(o, me->address());
    auto at_a = a->allocate(64, Access::remote_read_write);
    auto at_b = b->allocate(64, Access::remote_read_write);
    const PeerId pa = me->add_peer(a->address());
    const PeerId pb = me->add_peer(b->address());
    (void)a->add_peer(me->address());
    (void)b->add_peer(me->address());
    auto src = me->allocate(64, Access::local);
    auto sink = me->allocate(64, Access::local);
    std::memset(sink->data(), 0, 64); // what the peers hold until the write below
    std::memset(src->data(), 0x5a, 8);
    int ctx = 0;
    {
        // Both peers reached once, their targets driven meanwhile (MSG accepts, RDM sets up
        // the peers), each flushed: nothing is left queued at either.
        test::Target ta([&](const std::atomic<bool>& done) { while (!done) a->progress(); });
        test::Target tb([&](const std::atomic<bool>& done) { while (!done) b->progress(); });
        for (const auto& [p, at] : {std::pair{pa, at_a}, std::pair{pb, at_b}}) {
            me->write(p, sink->slice(0, 64), at->remote(), 0, &ctx);
            (void)me->wait(&ctx, soon());
            me->flush(p, at->remote(), soon());
        }
        REQUIRE(ta.finish().empty());
        REQUIRE(tb.finish().empty());
    }
    std::memset(sink->data(), 0, 64);
    me->write_notify(pb, src->slice(0, 8), at_b->remote(), 0, 1, &ctx); // small: injected
    (void)me->wait(&ctx, soon());
    test::Target ta([&](const std::atomic<bool>& done) { while (!done) a->progress(); });
    me->flush(pa, at_a->remote(), soon()); // a's flush: says nothing of b
    REQUIRE(ta.finish().empty());
    // b progresses only 20 ms after the read is posted: a read that was not flushed first
    // has long copied b's old bytes by then (shm reads need no target).
    test::Target tb([&](const std::atomic<bool>& done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        while (!done)
            b->progress();
    });
    me->read(pb, sink->slice(0, 8), at_b->remote(), 0, &ctx);
    (void)me->wait(&ctx, soon());
    REQUIRE(tb.finish().empty());
    CHECK(std::memcmp(sink->data(), src->data(), 8) == 0);
}

TEST_CASE("node: poll returns a notification that waits behind entries of a removed peer",
          "[node][notify][threads]")
{
    // A service takes "what is here now" by polling until poll() returns 0.
    // A removed peer's closed endpoint leaves weft entries of its own in the
    // queue (its cancelled receives, on tcp); a poll that read only those
    // returned 0 with the next peer's notification right behind them.
    WEFT_EACH_CELL(c);
    Options o = test::options_for(c);
    o.progress = Progress::polling; // nothing reads the queue but the poll under test
    auto server = Node::open(o);
    auto leaving = Node::open_like(o, server->address());
    auto staying = Node::open_like(o, server->address());
    auto inbox = server->allocate(4096, Access::remote_write);
    const PeerId leaving_id = server->add_peer(leaving->address());
    const PeerId staying_id = server->add_peer(staying->address());
    std::atomic<int> phase{0}; // 2: go on; 3: staying's second is out, 4: and complete
    const auto client = [&](Node& me, std::uint32_t value, bool second,
                            const std::atomic<bool>& done) {
        const PeerId srv = me.add_peer(server->address());
        auto src = me.allocate(64, Access::local);
        int ctx = 0;
        me.write_notify(srv, src->slice(0, 64), inbox->remote(), 0, value, &ctx);
        (void)me.wait(&ctx, soon(60s));
        const Deadline until = soon(60s);
        while (phase < 2 && !done && !until.expired())
            me.progress();
        if (second) {
            me.write_notify(srv, src->slice(0, 64), inbox->remote(), 0, 7, &ctx);
            phase = 3;
            (void)me.wait(&ctx, soon(60s));
            phase = 4;
        }
        while (!done && !until.expired())
            me.progress();
    };
    test::Target a([&](const std::atomic<bool>& done) { client(*leaving, 1, false, done); });
    test::Target b([&](const std::atomic<bool>& done) { client(*staying, 2, true, done); });
    for (int n = 0; n < 2; ++n)
        (void)server->wait_for(Op::notify, soon(60s));
    server->remove_peer(leaving_id); // its endpoint closes; what it leaves stays queued
    phase = 2;
    const Deadline until = soon(60s);
    while (phase < 3 && !until.expired())
        std::this_thread::sleep_for(1ms); // the server reads nothing meanwhile
    REQUIRE(phase >= 3);
    // Where the provider moves data by itself (sockets: its own threads), the write completes
    // once the server's side has it, however loaded the machine; where it needs the server's
    // poll (ofi_rxd's acknowledgement), it waits in the socket for the poll, which reads it.
    for (const Deadline later = soon(2s); phase < 4 && !later.expired();)
        std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(300ms);
    std::array<Completion, 16> got;
    const std::size_t n = server->poll(got);
    INFO(n << " completions");
    REQUIRE(n == 1);
    CHECK(got[0].op == Op::notify);
    CHECK(got[0].data == 7);
    CHECK(got[0].peer == staying_id);
    CHECK(a.finish().empty());
    CHECK(b.finish().empty());
}
