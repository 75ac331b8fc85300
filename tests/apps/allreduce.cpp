// SPDX-License-Identifier: MIT
// The ring all-reduce (examples/apps/allreduce) as its users launch it: 4 ranks over
// the TCP store, and under mpirun on shm with more ranks than cores (Waiting::yield).
// Every rank checks every float of the sum, at sizes below the rank count, not divisible
// by it, and up to 1 MiB.
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

void every_rank_verified(std::vector<Process>& ranks, const std::string& provider)
{
    weft::test::finish_all(ranks);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0);
        CHECK(output.find(fmt::format("all-reduce verified at every size over {}", provider)) !=
              std::string::npos);
    }
}

} // namespace

TEST_CASE("allreduce: 4 ranks over the TCP store sum exactly, from 4 B to 1 MiB, chunks "
          "whole or in many uneven pieces",
          "[allreduce][app][process]")
{
    // 1000 B pieces: a 1 MiB chunk goes in 263, a 65540 B one in 17 of which the last is short.
    const std::string piece = GENERATE(as<std::string>{}, "--piece=0", "--piece=1000");
    INFO(piece);
    const std::uint16_t port = weft::test::free_port();
    std::vector<Process> ranks;
    for (std::uint32_t r = 0; r < 4; ++r) {
        std::vector<std::string> argv{WEFT_ALLREDUCE_PATH, "--check", piece};
        argv.insert(argv.end(), sizes.begin(), sizes.end());
        ranks.emplace_back(Command{argv,
                                   {fmt::format("WEFT_STORE=127.0.0.1:{}", port),
                                    fmt::format("WEFT_RANK={}", r), "WEFT_SIZE=4"}},
                           std::to_string(r));
    }
    every_rank_verified(ranks, "tcp");
}

TEST_CASE("allreduce: mpirun -np 4 on shm, more ranks than cores, waits yielding the core",
          "[allreduce][app][process]")
{
    WEFT_SKIP_IF(weft::test::unless("mpirun --version",
                                    "no mpirun here (Debian openmpi-bin; ./weft.sh test installs it)"));
    std::vector<std::string> argv{"mpirun", "--allow-run-as-root", "--oversubscribe", "-x",
                                  "WEFT_PROVIDER=shm", "-np", "4", WEFT_ALLREDUCE_PATH, "--yield",
                                  "--check"};
    argv.insert(argv.end(), sizes.begin(), sizes.end());
    std::vector<Process> job;
    job.emplace_back(Command{argv}, "mpirun");
    weft::test::finish_all(job);
    const std::string output = job[0].output();
    INFO(output);
    CHECK(job[0].status() == 0);
    for (int r = 0; r < 4; ++r)
        CHECK(output.find(fmt::format("rank {} of 4: all-reduce verified at every size over shm", r)) !=
              std::string::npos);
}
