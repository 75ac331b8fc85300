// SPDX-License-Identifier: MIT
// Node::flush is per peer: on one RDM endpoint serving many peers, a flush to one
// says nothing of the writes to another, and a read from that other still waits behind
// them. On shm a read overtakes a write queued at its target (QUIRKS.md); the passive
// targets here never progress, so a read that was not flushed first sees old bytes.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstring>
#include <thread>

#include "support/cases.hpp"

using namespace weft;
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
