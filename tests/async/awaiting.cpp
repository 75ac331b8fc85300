// SPDX-License-Identifier: MIT
// Coroutines over a Node: what completes at once does not suspend; a deadline
// stops the wait, not the wire, and the late completion is reaped; a stop
// token cancels from another thread; one thread dispatches at a time; two
// Nodes in two threads play ping-pong through node.run, asleep; a caller's own
// operation with no context passes through dispatch() to its poll.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <latch>
#include <optional>
#include <thread>

#include "async/support.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::Fleet;
using weft::test::soon;

namespace {

const test::Case tcp_msg{"tcp", EndpointKind::msg};
const test::Case tcp_rdm{"tcp;ofi_rxm", EndpointKind::rdm};
const test::Case shm_rdm{"shm", EndpointKind::rdm};

/// Progresses `node` in a thread of its own until destroyed.
struct Serve {
    std::atomic<bool> stop{false};
    std::thread thread;
    explicit Serve(Node& node)
        : thread([this, &node] {
              while (!stop)
                  node.progress();
          })
    {
    }
    ~Serve()
    {
        stop = true;
        thread.join();
    }
};

} // namespace

TEST_CASE("async: a million operations that complete at once never suspend", "[async][stack]")
{
    const test::Case c = GENERATE(test::Case(tcp_msg), test::Case(shm_rdm));
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    Fleet f(test::options_for(c), 1, 64);
    auto src = f.hub->allocate(8, Access::local);
    Serve serve(*f.targets[0]);
    constexpr int count = 1'000'000;
    auto burst = [](Node& hub, PeerId p, Local s, RemoteRegion r) -> Task<int> {
        int done = 0;
        for (int i = 0; i < count; ++i) {
            const Completion got = co_await hub.write(p, s, r, 0, soon());
            done += got.op == Op::write;
        }
        co_return done;
    }(*f.hub, f.ids[0], src->slice(0, 8), f.regions[0]->remote());
    // Started, it runs to its end without suspending once: an 8-byte write is
    // injected, and its completion taken at once, not resumed from dispatch().
    burst.start();
    REQUIRE(burst.done());
    CHECK(burst.result() == count);
}

TEST_CASE("async: a deadline stops the wait, not the read: the late completion is reaped, the "
          "frame long gone",
          "[async][deadline]")
{
    const test::Case c = GENERATE(test::Case(tcp_msg), test::Case(tcp_rdm));
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    Options o = test::options_for(c);
    o.progress = Progress::polling; // the target answers reads only while it is driven
    Fleet f(o, 1, 1 << 20);
    std::memset(f.regions[0]->data(), 0x6b, 1 << 20);
    auto sink = f.hub->allocate(1 << 20, Access::local);
    std::memset(sink->data(), 0, 1 << 20);
    {
        auto reading = [](Node& hub, PeerId p, Local s, RemoteRegion r) -> Task<int> {
            try {
                (void)co_await hub.read(p, s, r, 0, Deadline::after(20ms));
                co_return 0;
            } catch (const TimeoutError&) {
                co_return 1;
            }
        }(*f.hub, f.ids[0], sink->slice(0, 1 << 20), f.regions[0]->remote());
        CHECK(f.hub->run(reading, soon()) == 1); // the target was never driven
        CHECK_FALSE(f.hub->drained(f.ids[0]));
        // The prepared transfer, destroyed while its reads fly, too.
        auto t = Transfer::prepare(f.hub, Direction::read,
                                   std::vector<TransferEntry>{{f.ids[0], sink->slice(0, 4096),
                                                               f.regions[0]->remote(), 0}});
        t.post();
    } // the frame and the Transfer are gone; the reads still fly
    f.drive([&] { return f.hub->drained(f.ids[0]); });
    CHECK(sink->data()[(1 << 20) - 1] == std::byte{0x6b}); // the read did land, late
    // And the Node goes on: a read awaited now completes.
    std::memset(sink->data(), 0, 64);
    auto again = [](Node& hub, PeerId p, Local s, RemoteRegion r) -> Task<Op> {
        co_return (co_await hub.read(p, s, r, 0, soon())).op;
    }(*f.hub, f.ids[0], sink->slice(0, 64), f.regions[0]->remote());
    again.start();
    f.drive([&] { return again.done(); });
    CHECK(again.result() == Op::read);
    CHECK(sink->data()[63] == std::byte{0x6b});
}

TEST_CASE("async: a stop token cancels a wait across threads, asleep or spinning",
          "[async][cancel]")
{
    const bool sleeping = GENERATE(false, true);
    INFO((sleeping ? "Waiting::sleep" : "Waiting::spin"));
    Options o = test::options_for(tcp_msg);
    if (sleeping)
        o.waiting = Waiting::sleep;
    Fleet f(o, 1, 64);
    std::stop_source stop;
    auto waiting = [](Node& hub, PeerId p, std::stop_token token) -> Task<int> {
        try {
            (void)co_await hub.notification(p, Deadline::after(30s), token);
            co_return 0;
        } catch (const Error& e) {
            co_return e.code();
        }
    }(*f.hub, f.ids[0], stop.get_token());
    std::thread canceller([&] {
        std::this_thread::sleep_for(50ms);
        stop.request_stop();
    });
    const auto before = Clock::now();
    const int code = f.hub->run(waiting, Deadline::after(10s));
    canceller.join();
    CHECK(code == -FI_ECANCELED);
    CHECK(Clock::now() - before < 5s);
}

TEST_CASE("async: two threads' dispatch(): the second is refused while the first is inside, "
          "never a crash",
          "[async][threads]")
{
    Fleet f(test::options_for(tcp_msg), 1, 64);
    std::latch inside(1);
    std::latch tried(1);
    std::string refusal;
    // A coroutine resumed inside dispatch() blocks there until the other
    // thread has tried.
    struct Blocker final : detail::Waiter {
        std::latch* in;
        std::latch* tried;
        bool resumed = false;
        void resume() noexcept override
        {
            resumed = true;
            in->count_down();
            tried->wait();
        }
        void give_up(Early) noexcept override {}
    } blocker;
    blocker.in = &inside;
    blocker.tried = &tried;
    blocker.deadline = Deadline::after(0ms); // readied by the first dispatch
    f.hub->dispatcher().suspend(blocker);
    std::thread other([&] {
        inside.wait();
        try {
            f.hub->dispatch();
        } catch (const UsageError& e) {
            refusal = e.what();
        }
        tried.count_down();
    });
    while (!blocker.resumed) // its deadline is seen within a few dispatches
        f.hub->dispatch();
    other.join();
    CHECK_THAT(refusal, Catch::Contains("another thread"));
}

TEST_CASE("async: two Nodes in two threads play ping-pong through node.run, asleep",
          "[async][run]")
{
    Options o = test::options_for(tcp_msg);
    o.waiting = Waiting::sleep;
    Fleet f(o, 1, 64);
    auto at_hub = f.hub->allocate(64, Access::remote_write);
    constexpr std::uint32_t rounds = 1000;
    auto player = [](Node& me, PeerId peer, RemoteRegion there, bool first) -> Task<std::uint32_t> {
        auto src = me.allocate(8, Access::local);
        std::uint32_t last = 0;
        for (std::uint32_t r = 1; r <= rounds; ++r) {
            if (first)
                (void)co_await me.write_notify(peer, src->slice(0, 8), there, 0, r, soon());
            last = (co_await me.notification(peer, soon())).data;
            if (!first)
                (void)co_await me.write_notify(peer, src->slice(0, 8), there, 0, r, soon());
        }
        co_return last;
    };
    std::uint32_t far_last = 0;
    std::thread far([&] {
        far_last = f.targets[0]->run(player(*f.targets[0], f.hub_at[0], at_hub->remote(), false),
                                     Deadline::after(60s));
    });
    const std::uint32_t near_last =
        f.hub->run(player(*f.hub, f.ids[0], f.regions[0]->remote(), true), Deadline::after(60s));
    far.join();
    CHECK(near_last == rounds);
    CHECK(far_last == rounds);
}

TEST_CASE("async: a caller's own operation posted with no context passes through dispatch() to "
          "its poll, beside awaited ones",
          "[async][dispatch]")
{
    const test::Case c = GENERATE(test::Case(tcp_msg), test::Case(shm_rdm));
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    Fleet f(test::options_for(c), 1, 1 << 16);
    Serve serve(*f.targets[0]);
    auto src = f.hub->allocate(1 << 16, Access::local);
    const RemoteRegion dst = f.regions[0]->remote();
    // An awaited write first: the Node's arena is in use from here on.
    auto awaited = [](Node& hub, PeerId p, Local s, RemoteRegion r) -> Task<Op> {
        co_return (co_await hub.write(p, s, r, 0, soon())).op;
    }(*f.hub, f.ids[0], src->slice(0, 1 << 16), dst);
    REQUIRE(f.hub->run(std::move(awaited), soon()) == Op::write);
    // Then the caller's own, with a null context: dispatch() is not its waiter.
    f.hub->write(f.ids[0], src->slice(0, 1 << 16), dst, 0, nullptr);
    std::optional<Completion> mine;
    const Deadline until = soon();
    while (!mine && !until.expired()) {
        (void)f.hub->dispatch();
        mine = f.hub->poll_one();
    }
    REQUIRE(mine);
    CHECK(mine->context == nullptr);
    CHECK(mine->op == Op::write);
}
