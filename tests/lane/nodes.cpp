// SPDX-License-Identifier: MIT
// Nodes on the same-host lane (Options::same_host): chosen and said so,
// access enforced by the peer's offer and the kernel's seals, revocation,
// a peer process killed on either side, and sleeping.
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/hex.hpp"
#include "support/open_fds.hpp"
#include "support/peer_process.hpp"
#include "support/thrown.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::hex;
using weft::test::soon;
using weft::test::unhex;

namespace {

const test::Case shm_lane{"shm", EndpointKind::rdm, SameHost::lane};

struct Two {
    std::shared_ptr<Node> a, b;
    PeerId to_b, to_a;
    explicit Two(const Options& o)
        : a(Node::open(o)), b(Node::open(o)), to_b(a->add_peer(b->address())),
          to_a(b->add_peer(a->address()))
    {
    }
};

/// Two sleeping Nodes on the lane, a's lane taken by b: from here on b is
/// idle; b's inbox for a's notifications.
struct Sleeping : Two {
    std::shared_ptr<MemoryRegion> inbox;
    Sleeping() : Two(options()), inbox(b->allocate(64, Access::remote_write))
    {
        REQUIRE(a->on_lane(to_b));
        (void)b->poll_one();
    }
    static Options options()
    {
        Options o = test::options_for(shm_lane);
        o.waiting = Waiting::sleep;
        o.progress = Progress::polling;
        return o;
    }
};

} // namespace

TEST_CASE("lane node: co-located Nodes take the lane and say so, others say why not",
          "[lane][node]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    const Options o = test::options_for(shm_lane);
    Two t(o);
    CHECK_THAT(t.a->selection().report(), Catch::Contains("same host: weft's lane"));
    REQUIRE(t.a->address().same_host());
    CHECK(t.a->address().same_host()->pid == static_cast<std::uint32_t>(::getpid()));
    CHECK(t.a->on_lane(t.to_b));
    CHECK_THAT(t.a->path(t.to_b), Catch::Contains("same-host lane to pid"));

    // Another boot's address: libfabric, saying why.
    auto c = Node::open(o);
    NodeAddress::SameHost other = *c->address().same_host();
    other.boot_id[0] ^= std::byte{1};
    const NodeAddress forged(c->address().kind(), c->address().provider(),
                             c->address().addr_format(), c->address().instance(),
                             {c->address().fabric_address().begin(),
                              c->address().fabric_address().end()},
                             other);
    const PeerId to_c = t.a->add_peer(forged);
    (void)c->add_peer(t.a->address());
    CHECK_FALSE(t.a->on_lane(to_c));
    CHECK_THAT(t.a->path(to_c), Catch::Contains("another host (boot id"));
    // And libfabric carries the data there.
    auto mine = c->allocate(64, Access::remote_read_write);
    auto src = t.a->allocate(64, Access::local);
    std::memcpy(src->data(), "through shm", 11);
    int ctx = 0;
    t.a->write(to_c, src->slice(0, 11), mine->remote(), 0, &ctx);
    (void)t.a->wait(&ctx, soon());
    CHECK(std::memcmp(mine->data(), "through shm", 11) == 0);

    Options off = o;
    off.same_host = SameHost::off;
    auto d = Node::open(off);
    CHECK_FALSE(d->address().same_host());
    CHECK_THAT(d->selection().report(), Catch::Contains("same host: shm like any peer"));
    CHECK_THAT(d->path(d->add_peer(t.a->address())), Catch::Contains("the same-host lane is off"));
}

TEST_CASE("lane node: Nodes opened with default Options take the lane by themselves, a named "
          "provider carries its co-located peers itself, and the report says which and why",
          "[lane][node]")
{
    // The application's environment decides otherwise: this is about the default.
    for (const char* v : {"WEFT_PROVIDER", "WEFT_SAME_HOST"})
        if (const char* set = std::getenv(v); set != nullptr && *set != '\0') {
            WARN(v << "=" << set << " is set: the default is not what runs");
            return;
        }
    auto a = Node::open();
    auto b = Node::open();
    CHECK_THAT(a->selection().report(),
               Catch::Contains("same host: weft's lane (automatic: no provider was named)"));
    const PeerId to_b = a->add_peer(b->address());
    (void)b->add_peer(a->address());
    CHECK(a->on_lane(to_b));
    CHECK_THAT(a->path(to_b), Catch::Contains("same-host lane to pid"));
    auto inbox = b->allocate(64, Access::remote_write);
    auto src = a->allocate(8, Access::local);
    std::memcpy(src->data(), "by lane", 7);
    int ctx = 0;
    a->write_notify(to_b, src->slice(0, 7), inbox->remote(), 0, 5, &ctx);
    (void)a->wait(&ctx, soon());
    CHECK(b->wait_for(Op::notify, soon()).data == 5);
    CHECK(std::memcmp(inbox->data(), "by lane", 7) == 0);

    Options named;
    named.provider = std::string(a->provider());
    auto c = Node::open(named);
    CHECK_FALSE(c->address().same_host());
    CHECK_THAT(c->selection().report(),
               Catch::Contains("like any peer (automatic: Options::provider named the provider)"));
    // A Node opened like a peer's (the peer chose the provider) keeps the lane.
    auto d = Node::open_like({}, a->address());
    CHECK(d->selection().options().same_host == SameHost::lane);
    CHECK(d->address().same_host());
}

TEST_CASE("lane node: a read-only export stays read-only whatever the writer claims",
          "[lane][node][memory]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    Two t(test::options_for(shm_lane));
    auto ro = t.b->allocate(4096, Access::remote_read);
    std::memset(ro->data(), 0x11, ro->size());
    REQUIRE(ro->segment() != nullptr); // sealed memfd: the kernel refuses peers' writes
    auto src = t.a->allocate(4096, Access::local);
    std::memset(src->data(), 0xee, src->size());
    // The honest descriptor: refused before posting, as on every cell.
    int ctx = 0;
    CHECK_THROWS_AS(t.a->write(t.to_b, src->slice(0, 8), ro->remote(), 0, &ctx), UsageError);
    // A forged one that claims write access: the owner's offer says no.
    const RemoteRegion r = ro->remote();
    const RemoteRegion forged(r.base(), r.length(), r.key(),
                              r.flags() | RemoteRegion::writable);
    t.a->write(t.to_b, src->slice(0, 8), forged, 0, &ctx);
    CHECK_THAT(test::thrown<Error>([&] { (void)t.a->wait(&ctx, soon()); }),
               Catch::Contains("read-only"));
    for (std::size_t i = 0; i < ro->size(); ++i)
        REQUIRE(ro->data()[i] == std::byte{0x11});
    // Reads work, and see the owner's writes at once.
    ro->data()[5] = std::byte{0x22};
    t.a->read(t.to_b, src->slice(0, 8), r, 0, &ctx);
    (void)t.a->wait(&ctx, soon());
    CHECK(src->data()[5] == std::byte{0x22});
}

TEST_CASE("lane node: revoke() while a peer writes in a loop: its next operation fails, the "
          "owner's bytes are never touched again",
          "[lane][node][revoke]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    Two t(test::options_for(shm_lane));
    auto target = t.b->allocate(4096, Access::remote_read_write);
    const RemoteRegion r = target->remote();
    std::atomic<bool> revoked{false};
    std::atomic<int> after{0};
    std::string failure;
    std::thread writer([&] {
        auto src = t.a->allocate(64, Access::local);
        std::memset(src->data(), 0x77, 64);
        int ctx = 0;
        for (;;) {
            const bool was = revoked.load();
            try {
                t.a->write(t.to_b, src->slice(0, 64), r, 0, &ctx);
                (void)t.a->wait(&ctx, soon());
            } catch (const Error& e) {
                failure = e.what();
                return;
            }
            if (was && ++after > 1) // one begun before it saw the revocation at most
                return;
        }
    });
    std::this_thread::sleep_for(50ms);
    target->revoke();
    std::memset(target->data(), 0, target->size()); // the owner's again
    revoked = true;
    writer.join();
    CHECK(after <= 1);
    CHECK_THAT(failure, Catch::Contains("never registered, or revoked"));
    std::this_thread::sleep_for(20ms);
    for (std::size_t i = 0; i < target->size(); ++i)
        REQUIRE(target->data()[i] == std::byte{0});
}

TEST_CASE("lane node: an owner killed while a peer reads: the peer's next operation fails, "
          "naming it lost, within the deadline",
          "[lane][node][faults][process]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    auto hub = Node::open(test::options_for(shm_lane));
    test::PeerProcess owner(WEFT_TEST_LANE_PEER,
                            {"shm", "rdm", hex(hub->address().encode()), "serve", "65536"});
    std::istringstream line(owner.first_line());
    std::string ready, address, region;
    line >> ready >> address >> region;
    REQUIRE(ready == "READY");
    const PeerId peer = hub->add_peer(NodeAddress::decode(unhex(address)));
    const RemoteRegion theirs = RemoteRegion::decode(unhex(region));
    auto sink = hub->allocate(64, Access::local);
    int ctx = 0;
    hub->read(peer, sink->slice(0, 64), theirs, 0, &ctx);
    (void)hub->wait(&ctx, soon());
    REQUIRE(hub->on_lane(peer));
    CHECK(sink->data()[63] == std::byte{0x5a});
    owner.kill_now();
    const auto killed = Clock::now();
    std::string why;
    while (Clock::now() - killed < 10s) {
        try {
            hub->read(peer, sink->slice(0, 64), theirs, 0, &ctx);
            (void)hub->wait(&ctx, soon());
        } catch (const Error& e) {
            CHECK(e.peer_lost());
            why = e.what();
            break;
        }
    }
    CHECK(Clock::now() - killed < 2s);
    CHECK_THAT(why, Catch::Contains("peer 0 is lost"));
    CHECK(hub->is_lost(peer));
}

TEST_CASE("lane node: a reader killed while it holds the mapping is lost, and nothing of its "
          "lane stays open",
          "[lane][node][faults][process]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    auto hub = Node::open(test::options_for(shm_lane));
    auto region = hub->allocate(1 << 20, Access::remote_read);
    const int before = weft::test::open_fds();
    test::PeerProcess reader(WEFT_TEST_LANE_PEER, {"shm", "rdm", hex(hub->address().encode()),
                                                   "read", hex(region->remote().encode())});
    std::istringstream line(reader.first_line());
    std::string ready, address;
    line >> ready >> address;
    REQUIRE(ready == "READY");
    const PeerId peer = hub->add_peer(NodeAddress::decode(unhex(address)));
    for (const auto until = Deadline::after(5s); !hub->on_lane(peer) && !until.expired();)
        hub->progress();
    std::this_thread::sleep_for(50ms); // it reads meanwhile
    reader.kill_now();
    const auto killed = Clock::now();
    while (!hub->is_lost(peer) && Clock::now() - killed < 10s)
        (void)hub->poll_one();
    CHECK(hub->is_lost(peer));
    CHECK(Clock::now() - killed < 2s);
    CHECK(weft::test::open_fds() == before);
}

TEST_CASE("lane node: a sleeping Node uses no CPU while idle and wakes for a notification",
          "[lane][node][sleep]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    Sleeping t;
    const RemoteRegion r = t.inbox->remote();
    REQUIRE(t.b->fd() >= 0);
    std::atomic<long> cpu_us{-1}, wakes{-1};
    std::atomic<std::uint32_t> got{0};
    std::thread sleeper([&] {
        rusage before{}, after{};
        ::getrusage(RUSAGE_THREAD, &before);
        const Completion c = t.b->wait_for(Op::notify, soon(10s));
        ::getrusage(RUSAGE_THREAD, &after);
        const auto us = [](const rusage& u) {
            return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000L + u.ru_utime.tv_usec +
                   u.ru_stime.tv_usec;
        };
        cpu_us = us(after) - us(before);
        wakes = after.ru_nvcsw - before.ru_nvcsw;
        got = c.data;
    });
    std::this_thread::sleep_for(1s); // it sleeps meanwhile
    auto src = t.a->allocate(8, Access::local);
    int ctx = 0;
    const auto sent = Clock::now();
    t.a->write_notify(t.to_b, src->slice(0, 8), r, 0, 42, &ctx);
    (void)t.a->wait(&ctx, soon());
    sleeper.join();
    CHECK(Clock::now() - sent < 1s);
    CHECK(got == 42);
    INFO("asleep for 1 s: " << cpu_us << " us of CPU, woken " << wakes << " times");
    // shm's queue has no descriptor, and nothing can come on it: the Node
    // sleeps on the lane alone (woken every 100 ms to look at its deadline),
    // not every 10 ms to read shm's queue.
    CHECK(wakes < 30);
    CHECK(cpu_us < 20000);
}

TEST_CASE("lane node: an event loop on Node::fd() gets what a co-located peer sends through "
          "libfabric, whose shm queue has no descriptor",
          "[lane][node][sleep]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    Sleeping t;
    const RemoteRegion r = t.inbox->remote();
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    REQUIRE(ep >= 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    REQUIRE(::epoll_ctl(ep, EPOLL_CTL_ADD, t.b->fd(), &ev) == 0);
    std::atomic<Clock::rep> written{0};
    std::thread writer([&] {
        std::this_thread::sleep_for(300ms);
        // The escape hatch: libfabric's shm, beside the lane.
        auto src = t.a->allocate(8, Access::local);
        int ctx = 0;
        t.a->endpoint(t.to_b).write_notify(src->slice(0, 8), r, 0, 7, &ctx,
                                            t.a->fabric_peer(t.to_b));
        (void)t.a->wait(&ctx, soon());
        written = Clock::now().time_since_epoch().count();
    });
    // The application's loop: sleep on the descriptor 5 s at a time.
    std::optional<Completion> n;
    const auto until = Deadline::after(10s);
    while (!n && !until.expired()) {
        if (t.b->trywait())
            (void)::epoll_wait(ep, &ev, 1, 5000);
        n = t.b->poll_one();
    }
    const auto found = Clock::now();
    writer.join();
    ::close(ep);
    REQUIRE(n);
    CHECK(n->op == Op::notify);
    CHECK(n->data == 7);
    // Woken (the peer said it uses libfabric; a timer then reads shm's queue
    // every 10 ms), not by the loop's 5 s timeout.
    CHECK(found - Clock::time_point(Clock::duration(written.load())) < 1s);
}

TEST_CASE("lane node: SameHost::enforced offers only sealed memory weft allocated",
          "[lane][node][enforced][process]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    // In a process of its own: enforcing makes the process non-dumpable.
    test::PeerProcess p(WEFT_TEST_LANE_PEER, {"shm", "rdm", "00", "enforced"});
    INFO(p.first_line());
    CHECK_THAT(p.first_line(), Catch::StartsWith("ENFORCED ok refused ok "));
    CHECK_THAT(p.first_line(), Catch::Contains("nothing else: SameHost::enforced"));
}

TEST_CASE("lane node: where the kernel refuses process_vm_* to a peer, its registered memory goes "
          "through libfabric, its allocations through the lane, and the path says why",
          "[lane][node][process]")
{
    WEFT_REQUIRE_CELL(shm_lane);
    if (::geteuid() != 0) {
        WARN("SKIPPED: the test becomes uid 65534 to lose CAP_SYS_PTRACE; run it as root");
        return;
    }
    // In processes of their own, as uid 65534: root's CAP_SYS_PTRACE would
    // let process_vm_* into a non-dumpable process.
    test::PeerProcess owner(WEFT_TEST_LANE_PEER, {"shm", "rdm", "00", "undumpable-serve"});
    std::istringstream line(owner.first_line());
    std::string ready, address, allocated, registered;
    line >> ready >> address >> allocated >> registered;
    REQUIRE(ready == "READY");
    test::PeerProcess p(WEFT_TEST_LANE_PEER,
                        {"shm", "rdm", "00", "undumpable-read", address, allocated, registered});
    INFO(p.first_line());
    CHECK_THAT(p.first_line(), Catch::StartsWith("UNDUMPABLE ok ok 1 0 the same-host lane"));
    CHECK_THAT(p.first_line(), Catch::Contains("shm elsewhere: the kernel refuses process_vm_*"));
}
