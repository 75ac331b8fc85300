// SPDX-License-Identifier: MIT
// The parameter server (examples/apps/param_server) as its users launch it: a server and
// 3 workers over the TCP store, each worker checking the parameters it pulls after every
// round (a sample) and all of them after the last, against the exact sums.
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/process.hpp"
#include "support/sockets.hpp"

using weft::test::Command;
using weft::test::Process;

TEST_CASE("param server: 3 workers push and pull 12 rounds over the TCP store, every "
          "parameter the exact sum",
          "[param-server][app][process]")
{
    const std::uint16_t port = weft::test::free_port();
    std::vector<Process> ranks;
    for (std::uint32_t r = 0; r < 4; ++r)
        ranks.emplace_back(Command{{WEFT_PARAM_SERVER_PATH, "65537", "12", "--yield"},
                                   {fmt::format("WEFT_STORE=127.0.0.1:{}", port),
                                    fmt::format("WEFT_RANK={}", r), "WEFT_SIZE=4"}},
                           std::to_string(r));
    weft::test::finish_all(ranks);
    for (std::uint32_t r = 0; r < 4; ++r) {
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0);
        CHECK(output.find(fmt::format("rank {} of 4: parameters verified after 12 rounds", r)) !=
              std::string::npos);
    }
    CHECK(ranks[0].output().find("3 workers, 65537 floats:") != std::string::npos);
}
