// SPDX-License-Identifier: MIT
// Edges of the data path and API misuse: each has a defined result on every
// provider (a completion, or an error naming the cause), never a crash or hang.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

namespace {


bool all_equal(const std::byte* p, std::size_t n, std::byte v)
{
    return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

/// Posts a write the target should refuse, then a read of `fence` (which
/// completes only after the write was handled: read-after-write). True when
/// either reported an error; a provider that drops refused RMA silently
/// (Quirks::remote_errors_silent) may report nothing.
bool refused(test::Pair& p, const std::function<void(void*)>& post, const RemoteRegion& fence)
{
    Endpoint& ep = p.client.endpoint();
    const bool silent = ep.quirks().remote_errors_silent;
    // Outlives the connection: when the write's error surfaces first, the
    // fence read may still be in flight (sockets lands it later, measured).
    auto sink = p.exposed.emplace_back(p.client.allocate(64, Access::remote_write));
    int ctx = 0;
    try {
        post(&ctx);
        (void)ep.wait(&ctx, silent ? Deadline::after(2s) : soon());
        p.client.read(sink->slice(0, 8), fence, 0, &ctx);
        (void)ep.wait(&ctx, silent ? Deadline::after(2s) : soon());
        // sockets reports the refusal after the fence's own completion (its
        // write completes on send, the error comes back on its own): allow it
        // a moment to arrive.
        for (const auto until = Clock::now() + 2s; Clock::now() < until;)
            (void)ep.poll_one();
    } catch (const TimeoutError& e) {
        if (!silent)
            FAIL("hung instead of reporting: " << e.what());
        return false;
    } catch (const Error& e) {
        INFO("reported: " << e.what());
        CHECK(e.code() < 0);
        return true;
    }
    return false;
}

/// What a cell must do with a refused access: report it, unless its traits
/// say it cannot (and then the test says so visibly).
void expect_refused(test::Pair& p, const std::function<void(void*)>& post, const RemoteRegion& fence,
                    const std::byte* victim, std::size_t n, std::byte original, const std::string& what)
{
    INFO(what);
    const Quirks& q = p.client.endpoint().quirks();
    const bool reported = refused(p, post, fence);
    if (q.read_only_unenforced && what == "a write to a read-only region") {
        WARN(p.client.selection().provider() << ": " << what
                                             << " lands (Quirks::read_only_unenforced)");
        return;
    }
    if (q.keys_unchecked) {
        WARN(p.client.selection().provider() << ": " << what
                                             << " is not refused (Quirks::keys_unchecked)");
        return;
    }
    if (q.remote_errors_silent && !reported)
        WARN(p.client.selection().provider()
             << ": " << what << " was refused silently (Quirks::remote_errors_silent)");
    else
        CHECK(reported);
    CHECK(all_equal(victim, n, original));
}

} // namespace

TEST_CASE("edges: zero-length operations complete and move nothing", "[matrix][edges]")
{
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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

TEST_CASE("misuse: a revoked region refuses local use and remote access", "[matrix][edges][revoke]")
{
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    auto p = test::connect_pair(c);
    std::vector<std::byte> memory(4096, std::byte{0x33});
    auto target = p.server.register_memory(memory, Access::remote_read_write);
    const RemoteRegion remote = target->remote();
    auto fence = p.expose(64, Access::remote_read);
    auto src = p.exposed.emplace_back(p.client.allocate(4096, Access::remote_write));
    std::memset(src->data(), 0x44, 4096);
    int ctx = 0;
    // Works before revocation (the read orders after the write).
    p.client.write(src->slice(0, 8), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    p.client.read(src->slice(64, 8), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    REQUIRE(memory[0] == std::byte{0x44});
    std::fill(memory.begin(), memory.end(), std::byte{0x33});

    CHECK(target->revoke());
    CHECK(target->revoked());
    CHECK_FALSE(target->revoke()); // twice: a no-op, says so
    CHECK_THROWS_WITH(target->remote(), Catch::Contains("revoked"));
    CHECK_THROWS_WITH(target->slice(0, 8), Catch::Contains("revoked"));
    CHECK_THROWS_AS(target->all(), UsageError);

    // The peer still holds the old descriptor: the provider must refuse it.
    expect_refused(
        p, [&](void* x) { p.client.write(src->slice(0, 64), remote, 0, x); }, fence->remote(),
        memory.data(), memory.size(), std::byte{0x33}, "a write to a revoked region");
}

TEST_CASE("least privilege: a forged descriptor gets no more than was exported",
          "[matrix][edges][privilege]")
{
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read);
    std::memset(target->data(), 0x33, 4096);
    const RemoteRegion honest = target->remote();
    REQUIRE_FALSE(honest.is_writable());
    auto src = p.exposed.emplace_back(p.client.allocate(4096, Access::local));
    std::memset(src->data(), 0x44, 4096);
    int ctx = 0;
    auto fence = p.expose(64, Access::remote_read);

    // weft refuses the honest descriptor itself...
    CHECK_THROWS_AS(p.client.write(src->slice(0, 8), honest, 0, &ctx), UsageError);
    // ...and a peer that forges the writable bit or the key meets the provider.
    SECTION("the writable bit forged")
    {
        const RemoteRegion forged(honest.base(), honest.length(), honest.key(),
                                  honest.flags() | RemoteRegion::writable);
        expect_refused(
            p, [&](void* x) { p.client.write(src->slice(0, 64), forged, 0, x); }, fence->remote(),
            target->data(), 4096, std::byte{0x33}, "a write to a read-only region");
    }
    SECTION("a guessed key")
    {
        auto writable = p.expose(4096, Access::remote_read_write);
        std::memset(writable->data(), 0x33, 4096);
        const RemoteRegion w = writable->remote();
        const RemoteRegion forged(w.base(), w.length(), w.key() + 1, w.flags());
        expect_refused(
            p, [&](void* x) { p.client.write(src->slice(0, 64), forged, 0, x); }, fence->remote(),
            writable->data(), 4096, std::byte{0x33}, "a write with a wrong key");
    }
}

TEST_CASE("misuse: posting on a closed endpoint is an error, closing twice is not",
          "[matrix][edges][close]")
{
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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
