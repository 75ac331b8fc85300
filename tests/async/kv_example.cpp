// SPDX-License-Identifier: MIT
// Lesson 7 (examples/07_kv_transfer) as a user runs it: 3 processes over the
// TCP store; the prefill writes 256 blocks, each decoder verifies its 128.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "support/process.hpp"
#include "support/sockets.hpp"

using namespace weft;

TEST_CASE("example 07: a prefill process writes 256 KV blocks to two decode processes, each "
          "notified once",
          "[async][example][process]")
{
    const std::uint16_t port = test::free_port();
    std::vector<test::Process> ranks;
    for (std::uint32_t r = 0; r < 3; ++r)
        ranks.emplace_back(test::Command{{WEFT_KV_TRANSFER_PATH},
                                         {fmt::format("WEFT_STORE=127.0.0.1:{}", port),
                                          fmt::format("WEFT_RANK={}", r), "WEFT_SIZE=3"}},
                           std::to_string(r));
    test::finish_all(ranks);
    for (std::uint32_t r = 0; r < 3; ++r) {
        const std::string output = ranks[r].output();
        INFO("rank " << r << " printed:\n" << output);
        CHECK(ranks[r].status() == 0);
        CHECK(output.find(r == 0 ? "rank 0: 256 blocks written"
                                 : fmt::format("rank {}: 128 blocks verified", r)) !=
              std::string::npos);
    }
}
