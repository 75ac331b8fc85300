// SPDX-License-Identifier: MIT
// Group: ranks as processes. 8 of the group example over the TCP store, rank 0
// serving it; under mpirun (the PMIx store); one of 8 killed mid-run over the
// TCP store, etcd, a file store and under mpirun: the survivors are told
// within 5 s, naming it, and shrink to a group of their own.
#include <signal.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/etcd.hpp"
#include "support/group_example.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/sockets.hpp"
#include "support/temp_dir.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::Command;
using weft::test::finish_all;
using weft::test::Process;

namespace {

std::optional<std::string> no_mpirun()
{
    return test::unless("mpirun --version",
                        "no mpirun here (Debian openmpi-bin; ./weft.sh test installs it)");
}

} // namespace

TEST_CASE("group: 8 processes of the group example over the TCP store, rank 0 serving it",
          "[group][process]")
{
    // A free port for the store: rank 0 listens on it.
    const std::uint16_t port = test::free_port();
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
        CHECK(test::ring_and_mesh_verified(output, r, 8));
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
    if (store == "etcd")
        WEFT_SKIP_IF(test::Etcd::unavailable());
    std::string where;
    std::optional<test::TempDir> dir;
    if (store == "etcd") {
        where = fmt::format("WEFT_ETCD={}", test::Etcd::shared().endpoint());
    } else if (store == "file store") {
        dir.emplace();
        where = fmt::format("WEFT_STORE={}", dir->path);
    } else {
        where = fmt::format("WEFT_STORE=127.0.0.1:{}", test::free_port());
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
    WEFT_SKIP_IF(no_mpirun());
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
    WEFT_SKIP_IF(no_mpirun());
    const test::Ran job = test::run(
        {{"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "8", WEFT_GROUP_EXAMPLE_PATH}},
        180s, "mpirun");
    test::check_launched_example(job, "mpirun");
}
