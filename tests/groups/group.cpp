// SPDX-License-Identifier: MIT
// Group: ranks joined through a Store. As threads over the in-process store
// on every provider cell (ring and mesh traffic, every byte and every
// notification's rank checked); as 8 processes of the group example over the
// TCP store; and the errors of a group that cannot form.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/etcd.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/threads.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::on_threads;
using weft::test::Command;
using weft::test::finish_all;
using weft::test::Process;
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
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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

TEST_CASE("group: 8 processes of the group example over the TCP store, rank 0 serving it",
          "[group][process]")
{
    // A free port for the store: rank 0 listens on it.
    std::uint16_t port = 0;
    {
        const SideListener probe("127.0.0.1", 0);
        port = probe.port();
    }
    std::vector<Process> ranks;
    for (std::uint32_t r = 0; r < 8; ++r)
        ranks.emplace_back(Command{{WEFT_GROUP_EXAMPLE_PATH},
                                   {fmt::format("WEFT_STORE=127.0.0.1:{}", port),
                                    fmt::format("WEFT_RANK={}", r), "WEFT_SIZE=8"}},
                           std::to_string(r));
    finish_all(ranks);
    for (std::uint32_t r = 0; r < 8; ++r) {
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0);
        CHECK(output.find(fmt::format("rank {} of 8: ring and mesh verified", r)) !=
              std::string::npos);
    }
    CHECK(ranks[0].output().find("the TCP store (rank 0 serves it)") != std::string::npos);
}

TEST_CASE("group: one of 8 ranks killed mid-run over the TCP store, etcd and a file store: "
          "every survivor's barrier ends within 5 s with an error naming it, and the 7 shrink to "
          "a group of their own and run ring and mesh in it",
          "[group][process][faults]")
{
    const std::string store = GENERATE(as<std::string>{}, "TCP store", "etcd", "file store");
    INFO(store);
    if (store == "etcd" && test::Etcd::unavailable()) {
        WARN("SKIPPED over etcd: " << *test::Etcd::unavailable());
        return;
    }
    std::string where;
    std::optional<test::TempDir> dir;
    if (store == "etcd") {
        where = fmt::format("WEFT_ETCD={}", test::Etcd::shared().endpoint());
    } else if (store == "file store") {
        dir.emplace();
        where = fmt::format("WEFT_STORE={}", dir->path);
    } else {
        const SideListener probe("127.0.0.1", 0);
        where = fmt::format("WEFT_STORE=127.0.0.1:{}", probe.port());
    }
    constexpr std::uint32_t n = 8;
    constexpr std::uint32_t victim = 5;
    std::vector<Process> ranks;
    for (std::uint32_t r = 0; r < n; ++r)
        ranks.emplace_back(Command{{WEFT_GROUP_MEMBER_PATH},
                                   {where, fmt::format("WEFT_JOB=killed-{}", ::getpid()),
                                    fmt::format("WEFT_RANK={}", r), fmt::format("WEFT_SIZE={}", n),
                                    fmt::format("WEFT_TEST_VICTIM={}", victim),
                                    "WEFT_TEST_SHRINK=1"}},
                           std::to_string(r));
    // Once the victim is through the first barrier, kill it.
    REQUIRE(ranks[victim].wait_for_output("READY", 120s));
    std::this_thread::sleep_for(300ms); // the others are in their second barrier
    const auto killed = std::chrono::steady_clock::now();
    ranks[victim].signal(SIGKILL);
    finish_all(ranks);
    for (std::uint32_t r = 0; r < n; ++r) {
        if (r == victim)
            continue;
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0); // an error, peer_lost(), naming the victim
        long long at = 0;
        const auto pos = output.find("AT ");
        REQUIRE(pos != std::string::npos);
        at = std::stoll(output.substr(pos + 3));
        const auto after = std::chrono::nanoseconds(at) - killed.time_since_epoch();
        CHECK(after < 5s);
        // Renumbered in the old order: the ranks above the victim move down.
        CHECK(output.find(fmt::format("SHRUNK rank {} of {} (first {}): ring and mesh "
                                               "verified",
                                               r < victim ? r : r - 1, n - 1, r)) !=
              std::string::npos);
    }
}

TEST_CASE("group: one of 8 ranks killed under mpirun --enable-recovery (the PMIx store): every "
          "survivor's barrier ends within 5 s with an error naming it, and the 7 shrink and run "
          "ring and mesh",
          "[group][process][faults][pmix]")
{
    if (!test::succeeds("mpirun --version")) {
        WARN("SKIPPED: no mpirun here (Debian openmpi-bin; ./weft.sh test installs it)");
        return;
    }
    constexpr std::uint32_t n = 8;
    constexpr std::uint32_t victim = 5;
    // --enable-recovery: without it mpirun ends every rank a second after one dies.
    const test::Ran job = test::run(
        {{"mpirun", "--allow-run-as-root", "--oversubscribe", "--enable-recovery", "-np",
          std::to_string(n), WEFT_GROUP_MEMBER_PATH},
         {fmt::format("WEFT_TEST_VICTIM={}", victim), "WEFT_TEST_SELF_KILL=1", "WEFT_TEST_SHRINK=1"}},
        180s, "mpirun-killed");
    const std::string& out = job.output;
    INFO("mpirun printed:\n" << out);
    const auto killed_at = out.find("KILLED AT ");
    REQUIRE(killed_at != std::string::npos);
    const long long killed = std::stoll(out.substr(killed_at + 10));
    for (std::uint32_t r = 0; r < n; ++r) {
        if (r == victim)
            continue;
        INFO("rank " << r);
        // "AT <ns> LOST 1 rank r of 8: rank(s) 5 left the group ..."
        const auto line = out.find(fmt::format("rank {} of {}: rank(s) {} left", r, n, victim));
        REQUIRE(line != std::string::npos);
        const auto at = out.rfind("AT ", line);
        REQUIRE(at != std::string::npos);
        CHECK(out.substr(at, line - at).find("LOST 1") != std::string::npos);
        CHECK(std::chrono::nanoseconds(std::stoll(out.substr(at + 3)) - killed) < 5s);
        CHECK(out.find(fmt::format("SHRUNK rank {} of {} (first {}): ring and mesh verified",
                                   r < victim ? r : r - 1, n - 1, r)) != std::string::npos);
    }
}

TEST_CASE("group: mpirun -np 8 of the group example: the PMIx store, ring and mesh",
          "[group][process][pmix]")
{
    if (!test::succeeds("mpirun --version")) {
        WARN("SKIPPED: no mpirun here (Debian openmpi-bin; ./weft.sh test installs it)");
        return;
    }
    const test::Ran job = test::run(
        {{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "8", WEFT_GROUP_EXAMPLE_PATH}},
        180s, "mpirun");
    INFO("mpirun printed:\n" << job.output);
    CHECK(job.status == 0);
    for (std::uint32_t r = 0; r < 8; ++r)
        CHECK(job.output.find(fmt::format("rank {} of 8: ring and mesh verified", r)) !=
              std::string::npos);
    CHECK(job.output.find("launched by a PMIx launcher") != std::string::npos);
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
