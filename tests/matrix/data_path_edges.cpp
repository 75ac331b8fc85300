// SPDX-License-Identifier: MIT
// Edges of the data path and API misuse: zero-length operations, unaligned
// buffers, a transfer above the provider's limit, a closed endpoint. Each has
// a defined result on every provider (a completion, or an error naming the
// cause), never a crash or hang.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <vector>

#include <rdma/fi_errno.h>

#include "support/cases.hpp"

using namespace weft;
using weft::test::all_equal;
using weft::test::soon;
using namespace std::chrono_literals;

TEST_CASE("edges: zero-length operations complete and move nothing", "[matrix][edges]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    std::memset(target->data(), 0x33, 4096);
    auto src = p.client.allocate(4096, Access::remote_write); // also a read sink (iWARP)
    std::memset(src->data(), 0x44, 4096);
    const RemoteRegion remote = target->remote();
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;

    p.client.write(src->slice(0, 0), remote, 100, &ctx);
    Completion w = ep.wait(&ctx, soon());
    CHECK((w.op == Op::write && w.len == 0));
    p.client.read(src->slice(0, 0), remote, 4096, &ctx); // at the very end: still in bounds
    Completion r = ep.wait(&ctx, soon());
    CHECK((r.op == Op::read && r.len == 0));
    const Local none[] = {src->slice(0, 0)};
    p.client.endpoint().writev(none, remote, 0, &ctx, p.client.peer());
    CHECK(ep.wait(&ctx, soon()).len == 0);

    // A zero-length write_notify is a doorbell: the notification arrives.
    p.client.write_notify(src->slice(0, 0), remote, 0, 0xbe11, &ctx);
    CHECK(p.server.endpoint().wait_for(Op::notify, soon()).data == 0xbe11);
    (void)ep.wait(&ctx, soon());
    // A zero-length message arrives as an empty message.
    p.client.send(src->slice(0, 0), &ctx);
    CHECK(p.server.endpoint().wait_for(Op::recv, soon()).message.empty());
    (void)ep.wait(&ctx, soon());

    CHECK(all_equal(target->data(), 4096, std::byte{0x33}));
    CHECK(all_equal(src->data(), 4096, std::byte{0x44}));
    // Bounds still hold for zero bytes: offset past the end is refused.
    CHECK_THROWS_AS(p.client.write(src->slice(0, 0), remote, 4097, &ctx), UsageError);
    // And the endpoint still works (the read orders after the write).
    p.client.write(src->slice(0, 64), remote, 0, &ctx);
    (void)ep.wait(&ctx, soon());
    p.client.read(src->slice(64, 8), remote, 0, &ctx);
    (void)ep.wait(&ctx, soon());
    CHECK(all_equal(target->data(), 64, std::byte{0x44}));
}

TEST_CASE("edges: unaligned user buffers move byte for byte", "[matrix][edges]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    // User memory (not weft's page-aligned allocation), registered at odd
    // addresses and lengths on both sides.
    std::vector<std::byte> mine(10007), theirs(10007);
    auto remote_mr = p.exposed.emplace_back(p.server.register_memory(
        std::span(theirs).subspan(3, 9001), Access::remote_read_write));
    auto local_mr = p.client.register_memory(std::span(mine).subspan(5, 9001),
                                             Access::remote_write);
    const RemoteRegion remote = remote_mr->remote();
    int ctx = 0;
    for (std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{4095}, std::size_t{8999}}) {
        INFO("size " << size);
        test::fill_pattern(local_mr->bytes(), size);
        p.client.write(local_mr->slice(1, size), remote, 1, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        // Read it back into another odd offset and compare.
        std::memset(local_mr->data() + 1, 0, size);
        p.client.read(local_mr->slice(0, size), remote, 1, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        REQUIRE(std::memcmp(local_mr->data(), theirs.data() + 3 + 1, size) == 0);
    }
}

TEST_CASE("edges: a transfer above the provider's max_msg_size is refused before posting",
          "[matrix][edges]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    Endpoint& ep = p.client.endpoint();
    const std::size_t max = ep.max_transfer();
    if (max == std::numeric_limits<std::size_t>::max() || max >= (std::size_t{1} << 40)) {
        WARN(c.label() << ": max_msg_size is unlimited here (" << max
                       << " B): nothing to exceed; the verbs cells in the fabric lab run this");
        return;
    }
    // A descriptor of a region larger than max_msg_size (a forged one: no
    // traffic may happen, so none is needed) and a source that claims as much.
    auto small = p.client.allocate(4096, Access::local);
    const RemoteRegion huge(0, std::uint64_t{max} * 2, 0x1234, RemoteRegion::readable | RemoteRegion::writable);
    const Local too_big{small->data(), max + 1, small->desc()};
    int ctx = 0;
    try {
        ep.write(too_big, huge, 0, &ctx, p.client.peer());
        FAIL("posted a write above max_msg_size");
    } catch (const UsageError& e) {
        CHECK(e.code() == -FI_EMSGSIZE);
        CHECK_THAT(e.what(), Catch::Contains("max_msg_size") && Catch::Contains("split"));
    }
    CHECK_THROWS_AS(ep.read(too_big, huge, 0, &ctx, p.client.peer()), UsageError);
    CHECK_FALSE(ep.poll_one().has_value());
}

TEST_CASE("misuse: posting on a closed endpoint is an error, closing twice is not",
          "[matrix][edges][close]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    auto src = p.client.allocate(4096, Access::local);
    const RemoteRegion remote = target->remote();
    int ctx = 0;
    Endpoint& ep = p.client.endpoint();
    CHECK_FALSE(ep.closed());
    ep.close();
    CHECK(ep.closed());
    ep.close(); // idempotent
    CHECK_THROWS_WITH(p.client.write(src->slice(0, 8), remote, 0, &ctx),
                      Catch::Contains("closed"));
    CHECK_THROWS_WITH(p.client.read(src->slice(0, 8), remote, 0, &ctx), Catch::Contains("closed"));
    CHECK_THROWS_AS(p.client.send(src->slice(0, 8), &ctx), UsageError);
    CHECK_THROWS_AS(ep.wait(&ctx, Deadline::after(1s)), UsageError);
    // The registration outlives the endpoint and is still released cleanly.
    CHECK_FALSE(src->revoked());
}
