// SPDX-License-Identifier: MIT
// Atomics on every cell: fetch-add and compare-and-swap where the provider
// has them, a clear refusal where it does not.
#include <catch2/catch.hpp>

#include <cstring>

#include <rdma/fi_errno.h>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

TEST_CASE("atomics: fetch-add and compare-and-swap, or a clear refusal", "[matrix][atomic]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(64, Access::remote_read_write);
    auto result = p.client.allocate(8, Access::local);
    const RemoteRegion remote = target->remote();
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;
    if (!ep.supports_atomics()) {
        try {
            ep.fetch_add(result->all(), remote, 8, 1, &ctx, p.client.peer());
            FAIL("atomics were posted on a provider without them");
        } catch (const UsageError& e) {
            CHECK(e.code() == -FI_EOPNOTSUPP);
            CHECK_THAT(e.what(), Catch::Contains("not supported by " +
                                                 std::string(p.client.selection().provider())));
            // The providers that have them are looked up on this machine, not listed from
            // memory: sockets offers them on both kinds of endpoint wherever libfabric has it.
            CHECK_THAT(e.what(), Catch::Contains("on this machine: "));
            CHECK_THAT(e.what(), Catch::Contains("sockets (MSG, RDM)"));
        }
        return;
    }
    std::uint64_t start = 40;
    std::memcpy(target->data() + 8, &start, 8);
    for (std::uint64_t i = 0; i < 10; ++i) {
        ep.fetch_add(result->all(), remote, 8, 2, &ctx, p.client.peer());
        CHECK(ep.wait(&ctx, soon()).op == Op::atomic);
        std::uint64_t old = 0;
        std::memcpy(&old, result->data(), 8);
        CHECK(old == start + 2 * i);
    }
    // 60 now: a swap that expects 60 succeeds, one that expects 0 does not.
    ep.compare_swap(result->all(), remote, 8, 60, 7, &ctx, p.client.peer());
    (void)ep.wait(&ctx, soon());
    std::uint64_t old = 0;
    std::memcpy(&old, result->data(), 8);
    CHECK(old == 60);
    ep.compare_swap(result->all(), remote, 8, 0, 99, &ctx, p.client.peer());
    (void)ep.wait(&ctx, soon());
    std::memcpy(&old, result->data(), 8);
    CHECK(old == 7);
    std::uint64_t now = 0;
    std::memcpy(&now, target->data() + 8, 8);
    CHECK(now == 7);
    CHECK_THROWS_AS(ep.fetch_add(result->all(), remote, 4, 1, &ctx, p.client.peer()), UsageError);
}
