// SPDX-License-Identifier: MIT
// What the async tests share: a writer Node with n target Nodes in this
// thread, each target's region, and a loop that dispatches every Node until
// the tasks under test end.
#pragma once

#include <atomic>
#include <cstring>
#include <thread>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "weft/async.hpp"

namespace weft::test {

struct Fleet {
    std::shared_ptr<Node> hub;
    std::vector<std::shared_ptr<Node>> targets;
    std::vector<PeerId> ids;        // the hub's id of each target
    std::vector<PeerId> hub_at;     // each target's id of the hub
    std::vector<std::shared_ptr<MemoryRegion>> regions; // each target's

    Fleet(const Options& o, std::size_t n, std::size_t region_size,
          Access access = Access::remote_read_write)
    {
        hub = Node::open(o);
        for (std::size_t i = 0; i < n; ++i) {
            targets.push_back(Node::open_like(o, hub->address()));
            ids.push_back(hub->add_peer(targets.back()->address()));
            hub_at.push_back(targets.back()->add_peer(hub->address()));
            regions.push_back(targets.back()->allocate(region_size, access));
            std::memset(regions.back()->data(), 0, region_size);
        }
        // Connections made, each peer reached once (RDM sets up its peers on
        // the first operation), while threads progress the targets: the tests
        // then drive every Node from this thread alone.
        std::atomic<bool> stop{false};
        std::vector<std::thread> progress;
        for (auto& t : targets)
            progress.emplace_back([&stop, node = t.get()] {
                while (!stop)
                    node->progress();
            });
        try {
            hub->connect(ids, soon());
            auto scratch = hub->allocate(8, Access::local);
            int ctx = 0;
            for (std::size_t i = 0; i < n; ++i) {
                hub->write(ids[i], scratch->slice(0, 8), regions[i]->remote(), 0, &ctx);
                (void)hub->wait(&ctx, soon());
                hub->flush(ids[i], regions[i]->remote(), soon()); // landed, not only sent
            }
        } catch (...) {
            stop = true;
            for (auto& th : progress)
                th.join();
            throw;
        }
        stop = true;
        for (auto& th : progress)
            th.join();
    }
    /// Dispatches every Node until `done()`; FAIL at the deadline.
    template <class Done>
    void drive(Done&& done, Deadline deadline = soon())
    {
        while (!done()) {
            hub->dispatch();
            for (auto& t : targets)
                t->dispatch();
            if (deadline.expired())
                FAIL("the tasks did not end before the deadline");
        }
    }
    /// Every Node dispatched for `d` (notifications that should not come, don't).
    void settle_for(std::chrono::milliseconds d)
    {
        const Deadline until = Deadline::after(d);
        drive([&] { return until.expired(); }, Deadline::after(d + std::chrono::seconds(5)));
    }
};

/// The byte block `b` of round `round` holds at `i`.
inline std::byte pattern_at(std::size_t b, std::uint32_t round, std::size_t i)
{
    return static_cast<std::byte>((b * 131 + round * 29 + i * 7 + 1) & 0xff);
}

} // namespace weft::test
