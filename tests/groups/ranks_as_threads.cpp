// SPDX-License-Identifier: MIT
// Group: ranks joined through a Store, as threads of this process over the
// in-process store: on every provider cell, ring and mesh traffic with every
// byte and every notification's rank checked; the neighbours of each
// topology; and the errors of a group that cannot form.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/threads.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::on_threads;
using weft::test::soon;

namespace {

constexpr std::size_t block = 4096;

std::uint64_t seed(std::uint32_t from, std::uint32_t to) { return from * 1000u + to; }

/// One rank's part: ring, then mesh, each write with a notification that
/// must name its writer; throws on any wrong byte or rank.
void ring_and_mesh(Group& g)
{
    const std::uint32_t me = g.rank();
    const std::uint32_t n = g.size();
    Node& node = g.node();
    auto inbox = node.allocate(n * block, Access::remote_write);
    auto src = node.allocate(block, Access::local);
    const auto inboxes = g.all_gather(inbox->remote(), soon(60s));
    if (inboxes.size() != n || inboxes[me] != inbox->remote())
        throw std::runtime_error("all_gather did not return every rank's region in rank order");
    const auto put = [&](std::uint32_t to) {
        test::fill_pattern(src->bytes(), seed(me, to));
        int ctx = 0;
        node.write_notify(g.peer(to), src->slice(0, block), inboxes[to], me * block, me, &ctx);
        (void)node.wait(&ctx, soon(60s));
    };
    const auto take = [&](std::uint32_t count) {
        for (std::uint32_t k = 0; k < count; ++k) {
            const Completion c = node.wait_for(Op::notify, soon(60s));
            const auto from = static_cast<std::uint32_t>(c.data);
            if (g.rank_of(c.peer) != from)
                throw std::runtime_error(fmt::format(
                    "rank {}: a notification from rank {} named peer {} (rank {})", me, from,
                    c.peer.index, g.rank_of(c.peer) ? static_cast<int>(*g.rank_of(c.peer)) : -1));
            std::vector<std::byte> want(block);
            test::fill_pattern(want, seed(from, me));
            if (std::memcmp(inbox->data() + from * block, want.data(), block) != 0)
                throw std::runtime_error(fmt::format("rank {}: rank {}'s block is wrong", me, from));
        }
    };
    g.connect(Topology::ring, soon(60s));
    put((me + 1) % n);
    take(1);
    g.barrier(soon(60s));
    for (std::uint32_t to = 0; to < n; ++to)
        if (to != me)
            put(to);
    take(n - 1);
    g.barrier(soon(60s)); // nobody's Node goes while others write to it
}

} // namespace

TEST_CASE("group: 4 ranks as threads over the in-process store: ring and mesh, every byte and "
          "every notification's rank",
          "[group][threads]")
{
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto store = std::make_shared<MemoryStore>();
    constexpr std::uint32_t n = 4;
    std::vector<std::string> choices(n);
    on_threads(n, [&](std::size_t me) {
        Group g = Group::join(store, static_cast<std::uint32_t>(me), n, o, soon(60s));
        choices[me] = g.choice();
        if (g.node().provider() != c.provider || g.node().kind() != c.kind)
            throw std::runtime_error(fmt::format("rank {} runs {}, not {}", me, g.describe(),
                                                 c.label()));
        ring_and_mesh(g);
    });
    for (const auto& choice : choices)
        CHECK(choice == choices[0]); // rank 0's choice, with its reasons, for all
    CHECK(choices[0].find(c.provider) != std::string::npos);
}

TEST_CASE("group: a rank that never joins is named by the others' timeout, and bad ranks are "
          "refused",
          "[group]")
{
    auto store = std::make_shared<MemoryStore>();
    Options o;
    o.provider = "tcp";
    o.node = test::test_address();
    CHECK_THROWS_AS(Group::join(store, 4, 4, o, soon()), UsageError);
    CHECK_THROWS_AS(Group::join(nullptr, 0, 1, o, soon()), UsageError);
    std::vector<std::string> errors(3);
    on_threads(3, [&](std::size_t me) {
        try {
            (void)Group::join(store, static_cast<std::uint32_t>(me), 4, o, Deadline::after(1s));
        } catch (const TimeoutError& e) {
            errors[me] = e.what();
        }
    });
    for (const auto& e : errors) {
        INFO(e);
        CHECK(e.find("rank(s) 3 did not publish") != std::string::npos);
    }
}

TEST_CASE("group: a rank with nothing to expose gives the empty RemoteRegion to all_gather: "
          "every rank gets it as no region, and the others' regions work",
          "[group]")
{
    auto store = std::make_shared<MemoryStore>();
    Options o;
    o.provider = "tcp";
    o.node = test::test_address();
    constexpr std::uint32_t n = 3;
    on_threads(n, [&](std::size_t me) {
        Group g = Group::join(store, static_cast<std::uint32_t>(me), n, o, soon(60s));
        // Rank 1 only reads: it exposes nothing.
        auto mr = g.node().allocate(64, Access::remote_read_write);
        std::memset(mr->data(), static_cast<int>(0x10 + me), 64);
        const RemoteRegion mine = me == 1 ? RemoteRegion{} : mr->remote();
        const auto regions = g.all_gather(mine, soon(60s));
        if (regions.size() != n || !regions[1].empty() || regions[0].empty() || regions[2].empty())
            throw std::runtime_error(fmt::format("rank {}: rank 1's region is not the empty one", me));
        try {
            (void)regions[1].read_address(0, 8);
            throw std::runtime_error("a read through the empty region would be posted");
        } catch (const UsageError& e) {
            if (std::string(e.what()).find("empty RemoteRegion") == std::string::npos)
                throw;
        }
        auto sink = g.node().allocate(64, Access::local);
        int ctx = 0;
        if (me == 1) { // reads rank 0's and 2's, then tells each it is done
            for (const std::uint32_t r : {0u, 2u}) {
                g.node().read(g.peer(r), sink->slice(0, 64), regions[r], 0, &ctx);
                (void)g.node().wait(&ctx, soon());
                if (sink->data()[63] != std::byte(0x10 + r))
                    throw std::runtime_error(fmt::format("rank {}'s bytes are wrong", r));
                g.node().write_notify(g.peer(r), sink->slice(0, 8), regions[r], 0, 7, &ctx);
                (void)g.node().wait(&ctx, soon());
            }
        } else { // drives its Node (the target of a read on tcp) until rank 1 is done
            (void)g.node().wait_for(Op::notify, g.peer(1), soon(60s));
        }
        g.barrier(soon(60s));
    });
}

TEST_CASE("group: neighbours of each topology, and the rank of each peer", "[group]")
{
    auto store = std::make_shared<MemoryStore>();
    Options o;
    o.provider = "tcp";
    o.node = test::test_address();
    constexpr std::uint32_t n = 5;
    on_threads(n, [&](std::size_t i) {
        const auto me = static_cast<std::uint32_t>(i);
        Group g = Group::join(store, me, n, o, soon(60s));
        const auto check = [&](bool ok, const char* what) {
            if (!ok)
                throw std::runtime_error(fmt::format("rank {}: {}", me, what));
        };
        check(g.neighbours(Topology::mesh).size() == n - 1, "mesh");
        check(g.neighbours(Topology::star) ==
                  (me == 0 ? std::vector<std::uint32_t>{1, 2, 3, 4} : std::vector<std::uint32_t>{0}),
              "star");
        auto ring = std::vector<std::uint32_t>{(me + n - 1) % n, (me + 1) % n};
        std::ranges::sort(ring);
        check(g.neighbours(Topology::ring) == ring, "ring");
        for (std::uint32_t r = 0; r < n; ++r)
            if (r != me)
                check(g.rank_of(g.peer(r)) == r, "rank_of(peer(r)) != r");
        bool refused = false;
        try {
            (void)g.peer(me);
        } catch (const UsageError&) {
            refused = true;
        }
        check(refused, "peer(own rank) was not refused");
        g.barrier(soon(60s));
    });
}
