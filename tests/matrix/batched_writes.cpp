// SPDX-License-Identifier: MIT
// Batched writes on every cell: one chain of writes, a completion every N, and
// nothing posted when one write of the batch is out of range.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

TEST_CASE("batched writes: one chain, a completion every N", "[matrix][batch]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    constexpr std::size_t count = 64, size = 256;
    auto target = p.expose(count * size, Access::remote_read_write);
    auto src = p.client.allocate(count * size, Access::local);
    test::fill_pattern(src->bytes(), 77);
    std::vector<Endpoint::Write> writes;
    for (std::size_t i = 0; i < count; ++i)
        writes.push_back({src->slice(i * size, size), i * size});
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;
    const std::size_t expected = ep.write_batch(writes, target->remote(), &ctx, 16, p.client.peer());
    CHECK(expected == 4);
    for (std::size_t i = 0; i < expected; ++i)
        CHECK(ep.wait(&ctx, soon()).op == Op::write);
    // No more completions than asked for.
    const auto quiet = Deadline::after(200ms);
    std::size_t extra = 0;
    while (!quiet.expired())
        extra += ep.poll_one().has_value();
    CHECK(extra == 0);
    auto back = p.client.allocate(count * size, Access::local);
    ep.read(back->all(), target->remote(), 0, &ctx, p.client.peer());
    (void)ep.wait(&ctx, soon());
    CHECK(std::memcmp(back->data(), src->data(), count * size) == 0);

    // A bad range anywhere: nothing is posted.
    writes[40].offset = count * size;
    CHECK_THROWS_AS(ep.write_batch(writes, target->remote(), &ctx, 16, p.client.peer()),
                    UsageError);
    CHECK_FALSE(ep.poll_one().has_value());
}
