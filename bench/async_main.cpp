// SPDX-License-Identifier: MIT
// weft-async-bench: what awaiting costs, in one process (targets progressed by
// threads of their own), every method interleaved block by block, medians:
//   ops:      a write awaited in a coroutine against the same write posted and
//             waited for (blocking), 8 B and 64 KiB, 1 and 64 in flight;
//   transfer: 256 x 16 KiB to 1, 2, 4 peers with one notification each, as a
//             Transfer, by hand with write_notify, and raw libfabric (fi_write,
//             fi_writedata on the last, fi_cq_read) on the same endpoints.
//   instructions: one cell of instructions per completed write under callgrind
//             (bench/async_instructions.py runs them all): blocking, coroutine
//             or asio (asio-post: Asio's floor, the blocking write and one
//             handler posted), SIZE bytes, DEPTH in flight; the timed loop is dumped
//             as "timed loop"; the target is a process of its own (async_remote.hpp).
//   sleep:    a round trip between two sleeping Nodes, each woken from its
//             descriptor: Node::sleep against the Asio pump.
//   usage: weft-async-bench [PROVIDER [msg|rdm [ops,transfer,sleep]]]   (default tcp msg, all)
//          weft-async-bench --instructions blocking|coroutine|asio|asio-post SIZE DEPTH [PROVIDER [msg|rdm]]
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <optional>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "async_remote.hpp"
#include "weft/asio.hpp"
#include "weft/async.hpp"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define WEFT_HAVE_CALLGRIND 1
#endif

using namespace weft;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

Deadline soon() { return Deadline::after(30s); }

struct Bench {
    std::shared_ptr<Node> hub;
    std::vector<std::shared_ptr<Node>> targets;
    std::vector<PeerId> ids;
    std::vector<std::shared_ptr<MemoryRegion>> regions;
    std::atomic<bool> stop{false};
    std::vector<std::thread> serving;
    Bench(const Options& o, std::size_t n, std::size_t size)
    {
        hub = Node::open(o);
        // The targets sleep on their descriptors between arrivals where the
        // provider has them: n spinning targets beside the hub on 2 cores would
        // measure the scheduler. (shm has none: its targets spin and yield.)
        Options quiet = o;
        quiet.waiting = Waiting::sleep;
        for (std::size_t i = 0; i < n; ++i) {
            try {
                targets.push_back(Node::open_like(quiet, hub->address()));
            } catch (const Error&) { // no descriptor to sleep on (shm)
                targets.push_back(Node::open_like(o, hub->address()));
            }
            ids.push_back(hub->add_peer(targets.back()->address()));
            (void)targets.back()->add_peer(hub->address());
            regions.push_back(targets.back()->allocate(size, Access::remote_write));
        }
        for (auto& t : targets)
            serving.emplace_back([this, node = t.get()] {
                std::array<Completion, 16> drop;
                for (std::uint32_t spins = 0; !stop; ++spins) {
                    if (node->poll(drop) > 0) // takes the notifications too
                        continue;
                    if (node->fd() >= 0 && node->trywait())
                        node->sleep(Deadline::after(10ms));
                    else if ((spins & 63) == 0)
                        std::this_thread::yield();
                }
            });
        hub->connect(ids, soon());
    }
    ~Bench()
    {
        stop = true;
        for (auto& t : serving)
            t.join();
    }
};

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
double seconds(F&& f)
{
    const auto t0 = Clock::now();
    f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

Task<> await_writes(Node& hub, PeerId p, Local src, RemoteRegion dst, int n)
{
    for (int i = 0; i < n; ++i)
        (void)co_await hub.write(p, src, dst, 0, soon());
}

void ops(const Options& o, std::size_t size, int depth)
{
    Bench b(o, 1, size * 64);
    auto src = b.hub->allocate(size * 64, Access::local);
    const int n = size > 4096 ? 2000 : 20000;
    std::vector<double> sync, async;
    std::vector<int> ctx(depth);
    for (int block = 0; block < 7; ++block) {
        sync.push_back(seconds([&] {
            for (int i = 0; i < n / depth; ++i) {
                for (int d = 0; d < depth; ++d)
                    b.hub->write(b.ids[0], src->slice(size * d, size), b.regions[0]->remote(),
                                 size * d, &ctx[d]);
                for (int d = 0; d < depth; ++d)
                    (void)b.hub->wait(&ctx[d], soon());
            }
        }) / n);
        std::vector<Task<>> tasks;
        for (int d = 0; d < depth; ++d)
            tasks.push_back(await_writes(*b.hub, b.ids[0], src->slice(size * d, size),
                                         b.regions[0]->remote(), n / depth));
        async.push_back(seconds([&] {
            for (auto& t : tasks)
                t.start();
            while (!std::all_of(tasks.begin(), tasks.end(), [](auto& t) { return t.done(); }))
                b.hub->dispatch();
        }) / n);
    }
    std::printf("ops  %-12s %6zu B  %2d in flight  blocking %8.0f ns/op  coroutine %8.0f ns/op  "
                "coroutine/blocking %.3f\n",
                o.provider.c_str(), size, depth, median(sync) * 1e9, median(async) * 1e9,
                median(async) / median(sync));
}

void raw_transfer(Bench& b, MemoryRegion& src, std::size_t count, std::size_t len)
{
    fid_cq* cq = b.hub->completions().queue()->get();
    std::size_t expected = 0, got = 0;
    std::vector<fi_cq_data_entry> e(64);
    auto reap = [&] {
        const ssize_t r = fi_cq_read(cq, e.data(), e.size());
        if (r > 0)
            got += static_cast<std::size_t>(r);
    };
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t p = i % b.ids.size();
        Endpoint& ep = b.hub->endpoint(b.ids[p]);
        const fi_addr_t to = b.hub->fabric_peer(b.ids[p]).addr;
        const RemoteRegion r = b.regions[p]->remote();
        const std::uint64_t off = (i / b.ids.size()) * len;
        const bool last = i + b.ids.size() >= count;
        for (;;) {
            const ssize_t rc =
                last ? fi_writedata(ep.get(), src.data() + i * len, len, src.desc(), 1, to,
                                    r.write_address(off, len), r.key(), &b)
                     : fi_write(ep.get(), src.data() + i * len, len, src.desc(), to,
                                r.write_address(off, len), r.key(), &b);
            if (rc == 0)
                break;
            reap();
        }
        ++expected;
    }
    while (got < expected)
        reap();
}

void transfers(const Options& o, std::size_t peers)
{
    constexpr std::size_t count = 256, len = 16 * 1024;
    Bench b(o, peers, count * len);
    auto src = b.hub->allocate(count * len, Access::local);
    std::vector<TransferEntry> entries;
    for (std::size_t i = 0; i < count; ++i)
        entries.push_back({b.ids[i % peers], src->slice(i * len, len),
                           b.regions[i % peers]->remote(), (i / peers) * len});
    auto t = Transfer::prepare(b.hub, Direction::write, entries, Notify{.enabled = true});
    std::vector<int> ctx(count);
    auto transfer = [&] {
        t.post();
        t.wait(soon());
    };
    auto by_hand = [&] {
        for (std::size_t i = 0; i < count; ++i) {
            const auto& e = entries[i];
            if (i + peers >= count)
                b.hub->write_notify(e.peer, e.local, e.remote, e.offset, 1, &ctx[i]);
            else
                b.hub->write(e.peer, e.local, e.remote, e.offset, &ctx[i]);
        }
        for (std::size_t i = 0; i < count; ++i)
            (void)b.hub->wait(&ctx[i], soon());
    };
    // Paired: each block times all three, in an order that turns every block
    // (ABC, CBA), and a ratio is taken within the block; the median of the
    // ratios cancels the drift a noisy machine shows between blocks.
    std::vector<double> tr, hand, raw, to_raw, to_hand;
    for (int block = 0; block < 21; ++block) {
        double x = 0, y = 0, z = 0;
        if (block % 2 == 0) {
            x = seconds(transfer), y = seconds(by_hand), z = seconds([&] { raw_transfer(b, *src, count, len); });
        } else {
            z = seconds([&] { raw_transfer(b, *src, count, len); }), y = seconds(by_hand), x = seconds(transfer);
        }
        tr.push_back(x), hand.push_back(y), raw.push_back(z);
        to_raw.push_back(z / x), to_hand.push_back(y / x);
    }
    const double bytes = count * len;
    std::printf("transfer %-12s 256 x 16 KiB to %zu peer(s)  Transfer %6.2f GB/s  by hand %6.2f "
                "GB/s  raw %6.2f GB/s  Transfer/raw %.3f  Transfer/by hand %.3f (medians of paired ratios)\n",
                o.provider.c_str(), peers, bytes / median(tr) / 1e9, bytes / median(hand) / 1e9,
                bytes / median(raw) / 1e9, median(to_raw), median(to_hand));
}

/// `n` writes of `size` bytes, `depth` in flight, the way `kind` says.
void run_writes(Node& hub, PeerId to, const RemoteRegion& dst, const std::string& kind,
                MemoryRegion& src, std::size_t size, int depth, int n, ::asio::io_context* io,
                weft::asio::Pump* pump)
{
    std::vector<int> ctx(depth);
    if (kind == "blocking") {
        for (int i = 0; i < n / depth; ++i) {
            for (int d = 0; d < depth; ++d)
                hub.write(to, src.slice(size * d, size), dst, size * d, &ctx[d]);
            for (int d = 0; d < depth; ++d)
                (void)hub.wait(&ctx[d], soon());
        }
    } else if (kind == "coroutine") {
        std::vector<Task<>> tasks;
        for (int d = 0; d < depth; ++d)
            tasks.push_back(await_writes(hub, to, src.slice(size * d, size), dst, n / depth));
        for (auto& t : tasks)
            t.start();
        while (!std::all_of(tasks.begin(), tasks.end(), [](auto& t) { return t.done(); }))
            hub.dispatch();
    } else {
        const bool adapter = kind == "asio";
        int left = depth;
        for (int d = 0; d < depth; ++d)
            ::asio::co_spawn(
                *io,
                [&, d]() -> ::asio::awaitable<void> {
                    for (int i = 0; i < n / depth; ++i) {
                        if (adapter) {
                            (void)co_await weft::asio::async_write(*pump, to, src.slice(size * d, size), dst,
                                                                   size * d, soon(), ::asio::use_awaitable);
                            continue;
                        }
                        // Asio's own floor: the blocking write, then one handler
                        // posted and its coroutine resumed, as every Asio operation is.
                        hub.write(to, src.slice(size * d, size), dst, size * d, &ctx[d]);
                        (void)hub.wait(&ctx[d], soon());
                        co_await ::asio::post(io->get_executor(), ::asio::use_awaitable);
                    }
                    if (--left == 0)
                        io->stop();
                },
                ::asio::detached);
        io->restart();
        io->run();
    }
}

int instructions(const char* self, const std::string& kind, std::size_t size, int depth, Options o)
{
    if (kind == "asio" || kind == "asio-post")
        o.waiting = Waiting::sleep;
    auto hub = Node::open(o);
    weft::bench::RemoteTarget target(self, hub, o, size * 64);
    hub->connect(target.id, soon());
    auto src = hub->allocate(size * 64, Access::local);
    std::optional<::asio::io_context> io;
    std::optional<weft::asio::Pump> pump;
    if (kind == "asio" || kind == "asio-post") {
        io.emplace();
        pump.emplace(*io, hub);
    }
    const int n = 64 * 40;
    auto run = [&](int count) {
        run_writes(*hub, target.id, target.region, kind, *src, size, depth, count,
                   io ? &*io : nullptr, pump ? &*pump : nullptr);
    };
    run(64 * 10); // warm
#ifdef WEFT_HAVE_CALLGRIND
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
#endif
    run(n);
#ifdef WEFT_HAVE_CALLGRIND
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("timed loop");
#endif
    std::printf("{\"kind\": \"%s\", \"size\": %zu, \"depth\": %d, \"ops\": %d}\n", kind.c_str(),
                size, depth, n);
    return 0;
}

/// Round trips between two Nodes that sleep between messages: each side
/// sleeps on its descriptor (Node::sleep) or inside an io_context (the Pump).
void sleeping_round_trips(Options o)
{
    o.waiting = Waiting::sleep;
    constexpr int n = 2000;
    std::vector<double> plain, pumped;
    for (int block = 0; block < 7; ++block) {
        for (const bool asio : {false, true}) {
            auto a = Node::open(o);
            auto z = Node::open_like(o, a->address());
            const PeerId to_z = a->add_peer(z->address());
            const PeerId to_a = z->add_peer(a->address());
            auto ra = a->allocate(64, Access::remote_write);
            auto rz = z->allocate(64, Access::remote_write);
            auto player = [](Node& me, PeerId peer, RemoteRegion there, bool first) -> Task<> {
                auto src = me.allocate(8, Access::local);
                for (int r = 0; r < n; ++r) {
                    if (first)
                        (void)co_await me.write_notify(peer, src->slice(0, 8), there, 0, 1, soon());
                    (void)co_await me.notification(peer, soon());
                    if (!first)
                        (void)co_await me.write_notify(peer, src->slice(0, 8), there, 0, 1, soon());
                }
            };
            // z first: its loop accepts a's connection.
            std::thread far([&] { z->run(player(*z, to_a, ra->remote(), false), Deadline::after(120s)); });
            a->connect(to_z, soon());
            const double t = seconds([&] {
                if (!asio) {
                    a->run(player(*a, to_z, rz->remote(), true), Deadline::after(120s));
                    return;
                }
                ::asio::io_context io;
                weft::asio::Pump pump(io, a);
                ::asio::co_spawn(
                    io,
                    [&]() -> ::asio::awaitable<void> {
                        auto src = a->allocate(8, Access::local);
                        for (int r = 0; r < n; ++r) {
                            (void)co_await weft::asio::async_write_notify(pump, to_z, src->slice(0, 8),
                                                                          rz->remote(), 0, 1, soon(),
                                                                          ::asio::use_awaitable);
                            (void)co_await weft::asio::async_notification(pump, to_z, soon(),
                                                                          ::asio::use_awaitable);
                        }
                        io.stop();
                    },
                    ::asio::detached);
                io.run();
            });
            far.join();
            (asio ? pumped : plain).push_back(t / n);
        }
    }
    std::printf("sleep %-12s round trip, both sides asleep between messages  Node::sleep %8.1f us  "
                "Asio pump %8.1f us  pump/sleep %.3f\n",
                o.provider.c_str(), median(plain) * 1e6, median(pumped) * 1e6,
                median(pumped) / median(plain));
}

} // namespace

int main(int argc, char** argv)
{
    if (argc >= 2 && std::string(argv[1]) == "--serve") // the target of an instruction cell
        return weft::bench::serve(argc, argv);
    if (argc >= 5 && std::string(argv[1]) == "--instructions") {
        Options o;
        o.provider = argc > 5 ? argv[5] : "tcp";
        o.kind = argc > 6 && std::string(argv[6]) == "rdm" ? EndpointKind::rdm : EndpointKind::msg;
        o.allow_shm = true;
        o.node = "127.0.0.1";
        try {
            return instructions(argv[0], argv[2], std::stoul(argv[3]), std::stoi(argv[4]), o);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "weft-async-bench: %s\n", e.what());
            return 1;
        }
    }
    Options o;
    o.provider = argc > 1 ? argv[1] : "tcp";
    o.kind = argc > 2 && std::string(argv[2]) == "rdm" ? EndpointKind::rdm : EndpointKind::msg;
    o.allow_shm = true;
    o.node = "127.0.0.1";
    const std::string only = argc > 3 ? argv[3] : "ops,transfer,sleep";
    try {
        if (only.find("ops") != std::string::npos)
            for (std::size_t size : {std::size_t{8}, std::size_t{64 * 1024}})
                for (int depth : {1, 64})
                    ops(o, size, depth);
        if (only.find("transfer") != std::string::npos)
            for (std::size_t peers : {1, 2, 4})
                transfers(o, peers);
        if (only.find("sleep") != std::string::npos)
            sleeping_round_trips(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-async-bench: %s\n", e.what());
        return 1;
    }
}
