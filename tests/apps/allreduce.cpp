// SPDX-License-Identifier: MIT
// The all-reduce (examples/apps/allreduce) as its users launch it: ranks over the TCP
// store in both schedules (the ring, whole or in pieces; halving and doubling), 3 ranks
// (the ring by default; halving with a pair folded into one), and under mpirun on shm with
// more ranks than cores (Waiting::yield), 7 of them halving (three pairs folded). Every
// rank checks every float of the sum, at sizes below the rank count, not divisible by it,
// and up to 1 MiB. Sizes and options it cannot take end it with the reason.
#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/sockets.hpp"

using namespace std::chrono_literals;
using weft::test::Command;
using weft::test::Process;

namespace {

const std::vector<std::string> sizes{"4", "12", "100", "1K", "65540", "1M"};

/// `n` ranks of weft-allreduce --check over a TCP store on loopback, with `args`.
std::vector<Process> start_ranks(std::uint32_t n, const std::vector<std::string>& args)
{
    const std::uint16_t port = weft::test::free_port();
    std::vector<Process> ranks;
    for (std::uint32_t r = 0; r < n; ++r) {
        std::vector<std::string> argv{WEFT_ALLREDUCE_PATH, "--check"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), sizes.begin(), sizes.end());
        ranks.emplace_back(Command{argv,
                                   {fmt::format("WEFT_STORE=127.0.0.1:{}", port),
                                    fmt::format("WEFT_RANK={}", r), fmt::format("WEFT_SIZE={}", n)}},
                           std::to_string(r));
    }
    return ranks;
}

void every_rank_verified(std::vector<Process>& ranks, const std::string& how)
{
    weft::test::finish_all(ranks);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0);
        CHECK(output.find(fmt::format("rank {} of {}: all-reduce verified at every size over {}", r,
                                      ranks.size(), how)) != std::string::npos);
    }
}

} // namespace

TEST_CASE("allreduce: 4 ranks over the TCP store sum exactly, from 4 B to 1 MiB, in both "
          "schedules, the ring's chunks whole or in many uneven pieces",
          "[allreduce][app][process]")
{
    // 1000 B pieces: a 1 MiB chunk goes in 263, a 65540 B one in 17 of which the last is short.
    const auto [schedule, piece, how] = GENERATE(table<std::string, std::string, std::string>({
        {"--schedule=ring", "--piece=0", "tcp (ring)"},
        {"--schedule=ring", "--piece=1000", "tcp (ring)"},
        {"", "", "tcp (halving)"}, // the default for a power of two
    }));
    std::vector<std::string> args;
    for (const std::string& a : {schedule, piece})
        if (!a.empty())
            args.push_back(a);
    INFO(fmt::format("{}", fmt::join(args, " ")));
    auto ranks = start_ranks(4, args);
    every_rank_verified(ranks, how);
}

TEST_CASE("allreduce: 3 ranks sum exactly in the ring (their default) and in halving, where "
          "ranks 0 and 1 fold into one of 2",
          "[allreduce][app][process]")
{
    const auto [args, how] = GENERATE(table<std::string, std::string>({
        {"", "tcp (ring)"},
        {"--schedule=halving", "tcp (halving)"},
    }));
    INFO(args);
    auto ranks = start_ranks(3, args.empty() ? std::vector<std::string>{} : std::vector{args});
    every_rank_verified(ranks, how);
}

TEST_CASE("allreduce: mpirun on shm, more ranks than cores, waits yielding the core: 4 ranks "
          "in both schedules, 7 halving",
          "[allreduce][app][process]")
{
    WEFT_SKIP_IF(weft::test::unless("mpirun --version",
                                    "no mpirun here (Debian openmpi-bin; ./weft.sh test installs it)"));
    const auto [n, schedule] = GENERATE(table<int, std::string>({{4, "ring"}, {4, "halving"}, {7, "halving"}}));
    INFO(n << " ranks, " << schedule);
    std::vector<std::string> argv{"mpirun", "--allow-run-as-root", "--oversubscribe", "-x",
                                  "WEFT_PROVIDER=shm", "-np", std::to_string(n), WEFT_ALLREDUCE_PATH,
                                  "--yield", "--check", "--schedule=" + schedule};
    argv.insert(argv.end(), sizes.begin(), sizes.end());
    std::vector<Process> job;
    job.emplace_back(Command{argv}, "mpirun");
    weft::test::finish_all(job);
    const std::string output = job[0].output();
    INFO(output);
    CHECK(job[0].status() == 0);
    for (int r = 0; r < n; ++r)
        CHECK(output.find(fmt::format("rank {} of {}: all-reduce verified at every size over shm ({})",
                                      r, n, schedule)) != std::string::npos);
}

TEST_CASE("allreduce: a size or option it cannot take ends the program saying which and how",
          "[allreduce][app][process]")
{
    const auto [arg, says] = GENERATE(table<std::string, std::string>({
        {"abc", "the size 'abc' is not a number of bytes"},
        {"5", "the size '5' is not a positive multiple of 4 bytes"},
        {"0", "the size '0' is not a positive multiple of 4 bytes"},
        {"17179869184G", "the size '17179869184G' is over 1 TiB"},
        {"--chek", "unknown option '--chek'"},
        {"--schedule=foo", "--schedule is ring or halving, not foo"},
        {"--piece=2", "--piece is 0 (whole chunks) or at least 4 bytes"},
    }));
    INFO(arg);
    std::vector<Process> one;
    one.emplace_back(Command{{WEFT_ALLREDUCE_PATH, "--check", arg}}, "weft-allreduce");
    weft::test::finish_all(one);
    INFO(one[0].output());
    CHECK(one[0].status() == 1);
    CHECK(one[0].output().find(says) != std::string::npos);
}
