// SPDX-License-Identifier: MIT
// The provider matrix: the same RMA write / read / write_notify / send-recv
// code on every provider present, both ends as threads in this process.
#include <catch2/catch.hpp>

#include <cstring>
#include <thread>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

namespace {

// Odd sizes and both page edges; 4 MiB is the largest the matrix checks.
const std::vector<std::size_t> sizes = {1,    7,     64,          4095,       4096,
                                        4097, 65537, (1u << 20) + 3, 4u << 20};
constexpr std::size_t region_size = (4u << 20) + 64;


bool same(const std::byte* a, const std::byte* b, std::size_t n)
{
    return std::memcmp(a, b, n) == 0;
}

} // namespace

TEST_CASE("matrix: RMA write lands byte for byte", "[matrix][rma][write]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto [target, plain, src, check] = p.rma(region_size);
    const RemoteRegion remote = RemoteRegion::decode(plain.encode()); // as a peer gets it
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;
    for (std::size_t size : sizes) {
        for (auto [lo, ro] : {std::pair<std::size_t, std::size_t>{0, 0}, {3, 5}}) {
            INFO("size " << size << " local offset " << lo << " remote offset " << ro);
            test::fill_pattern(src->bytes(), size + lo);
            p.client.write(src->slice(lo, size), remote, ro, &ctx);
            CHECK(ep.wait(&ctx, soon()).op == Op::write);
            // A read of the same range completes after the write has landed
            // (read-after-write ordering), so both copies can be compared.
            std::memset(check->data(), 0, size);
            p.client.read(check->slice(0, size), remote, ro, &ctx);
            CHECK(ep.wait(&ctx, soon()).op == Op::read);
            REQUIRE(same(check->data(), src->data() + lo, size));
            REQUIRE(same(target->data() + ro, src->data() + lo, size));
        }
    }
}

TEST_CASE("matrix: RMA read returns the target's bytes", "[matrix][rma][read]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(region_size, Access::remote_read);
    test::fill_pattern(target->bytes(), 42);
    auto sink = p.client.allocate(region_size, Access::local);
    const RemoteRegion remote = target->remote();
    int ctx = 0;
    for (std::size_t size : sizes) {
        for (auto [lo, ro] : {std::pair<std::size_t, std::size_t>{0, 0}, {1, 7}}) {
            INFO("size " << size << " local offset " << lo << " remote offset " << ro);
            std::memset(sink->data(), 0, region_size);
            p.client.read(sink->slice(lo, size), remote, ro, &ctx);
            const Completion done = p.client.endpoint().wait(&ctx, soon());
            CHECK(done.op == Op::read);
            REQUIRE(same(sink->data() + lo, target->data() + ro, size));
            // Nothing outside the requested range was touched.
            REQUIRE(std::all_of(sink->data(), sink->data() + lo,
                                [](std::byte b) { return b == std::byte{0}; }));
            REQUIRE(sink->data()[lo + size] == std::byte{0});
        }
    }
}

TEST_CASE("matrix: write_notify delivers data then the notification", "[matrix][rma][notify]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(region_size, Access::remote_write);
    auto src = p.client.allocate(region_size, Access::local);
    const RemoteRegion remote = target->remote();
    int ctx = 0;
    std::uint32_t value = 7;
    for (std::size_t size : sizes) {
        INFO("size " << size);
        test::fill_pattern(src->bytes(), size);
        p.client.write_notify(src->slice(1, size), remote, 9, value, &ctx);
        const Completion n = p.server.endpoint().wait_for(Op::notify, soon());
        CHECK(n.data == value);
        REQUIRE(same(target->data() + 9, src->data() + 1, size));
        CHECK(p.client.endpoint().wait(&ctx, soon()).context == &ctx);
        ++value;
    }
    // Many notifications in a row arrive in order, none lost; the target polls
    // as it goes (on iWARP a notification needs a free receive at the target).
    constexpr std::uint32_t burst = 64;
    std::vector<std::uint32_t> got;
    for (std::uint32_t i = 0; i < burst; ++i) {
        p.client.write_notify(src->slice(0, 8), remote, 8 * (i % 16), 1000 + i, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        while (auto n = p.server.endpoint().poll_one())
            if (n->op == Op::notify)
                got.push_back(n->data);
    }
    while (got.size() < burst)
        got.push_back(p.server.endpoint().wait_for(Op::notify, soon()).data);
    for (std::uint32_t i = 0; i < burst; ++i)
        REQUIRE(got[i] == 1000 + i);
}

TEST_CASE("matrix: send and receive messages both ways", "[matrix][msg]")
{
    const auto c = test::each_cell();
    Options o;
    o.slot_size = (4u << 20) + 64;
    o.rx_slots = 4;
    WEFT_REQUIRE_CELL(c, o);
    INFO(c.label());
    auto p = test::connect_pair(c, o);
    auto src = p.client.allocate(4u << 20, Access::local);
    auto reply = p.expose(4u << 20, Access::local);
    int ctx = 0;
    for (std::size_t size : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{4097},
                             std::size_t{65537}, std::size_t{4u << 20}}) {
        INFO("size " << size);
        test::fill_pattern(src->bytes(), size * 3);
        p.client.send(src->slice(0, size), &ctx);
        const Completion got = p.server.endpoint().wait_for(Op::recv, soon());
        REQUIRE(got.message.size() == size);
        REQUIRE(same(got.message.data(), src->data(), size));
        // Echo it back from a different buffer.
        std::memcpy(reply->data(), got.message.data(), size);
        p.server.send(reply->slice(0, size), &ctx);
        const Completion back = p.client.endpoint().wait_for(Op::recv, soon());
        REQUIRE(back.message.size() == size);
        REQUIRE(same(back.message.data(), src->data(), size));
        (void)p.client.endpoint().wait(&ctx, soon());
        (void)p.server.endpoint().wait(&ctx, soon());
    }
}

TEST_CASE("matrix: both ends in their own threads", "[matrix][threads]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    constexpr std::size_t size = 65536;
    constexpr int rounds = 50;
    auto server_mr = p.expose(size, Access::remote_write);
    auto client_mr = p.client.allocate(size, Access::remote_write);
    const RemoteRegion at_server = server_mr->remote();
    const RemoteRegion at_client = client_mr->remote();
    // The server echoes every notified buffer back, in its own thread.
    test::Target server([&](const std::atomic<bool>&) {
        int sctx = 0;
        for (int i = 0; i < rounds; ++i) {
            const auto n = p.server.endpoint().wait_for(Op::notify, soon());
            p.server.write_notify(server_mr->slice(0, size), at_client, 0, n.data, &sctx);
            (void)p.server.endpoint().wait(&sctx, soon());
        }
    });
    auto src = p.client.allocate(size, Access::local);
    int ctx = 0;
    for (int i = 0; i < rounds; ++i) {
        test::fill_pattern(src->bytes(), static_cast<std::uint64_t>(i));
        p.client.write_notify(src->slice(0, size), at_server, 0, static_cast<std::uint32_t>(i), &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        REQUIRE(p.client.endpoint().wait_for(Op::notify, soon()).data == static_cast<std::uint32_t>(i));
        REQUIRE(same(client_mr->data(), src->data(), size));
    }
    REQUIRE(server.finish().empty());
}

TEST_CASE("matrix: more messages than the receiver has slots are held, not lost",
          "[matrix][msg][flow]")
{
    const auto c = test::each_cell();
    Options o;
    o.rx_slots = 4;
    o.slot_size = 256;
    WEFT_REQUIRE_CELL(c, o);
    INFO(c.label());
    auto p = test::connect_pair(c, o);
    constexpr std::uint32_t count = 100;
    std::vector<std::uint32_t> got;
    // A slow receiver: it polls now and then, in its own thread.
    test::Target receiver([&](const std::atomic<bool>&) {
        while (got.size() < count) {
            const auto m = p.server.endpoint().wait_for(Op::recv, soon());
            std::uint32_t v = 0;
            std::memcpy(&v, m.message.data(), sizeof v);
            got.push_back(v);
            if (got.size() % 10 == 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    });
    auto src = p.client.allocate(count * sizeof(std::uint32_t), Access::local);
    int ctx = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
        std::memcpy(src->data() + 4 * i, &i, 4);
        p.client.send(src->slice(4 * i, 4), &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
    }
    REQUIRE(receiver.finish().empty());
    REQUIRE(got.size() == count);
    for (std::uint32_t i = 0; i < count; ++i)
        REQUIRE(got[i] == i);
    if (const auto credits = p.client.endpoint().credits(); credits.peer_slots)
        CHECK(credits.sent == count + credits.nudges); // flow control was in charge (iWARP);
                                                       // a late hello adds nudges (loaded hosts)
}

TEST_CASE("matrix: scatter-gather and inject", "[matrix][rma][sg]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(1 << 16, Access::remote_read_write);
    auto local = p.client.allocate(1 << 16, Access::local);
    test::fill_pattern(local->bytes(), 5);
    const RemoteRegion remote = target->remote();
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;
    const std::size_t segments =
        std::min<std::size_t>({3, ep.write_iov_limit(), ep.read_iov_limit()});
    std::vector<Local> gather;
    std::size_t total = 0;
    for (std::size_t i = 0; i < segments; ++i) {
        gather.push_back(local->slice(1000 * i + i, 100 + 50 * i));
        total += 100 + 50 * i;
    }
    ep.writev(gather, remote, 11, &ctx, p.client.peer());
    (void)ep.wait(&ctx, soon());
    // Read back scattered into the same shape, at another place.
    auto back = p.client.allocate(1 << 16, Access::local);
    std::vector<Local> scatter;
    for (std::size_t i = 0; i < segments; ++i)
        scatter.push_back(back->slice(2000 * i, 100 + 50 * i));
    ep.readv(scatter, remote, 11, &ctx, p.client.peer());
    (void)ep.wait(&ctx, soon());
    for (std::size_t i = 0; i < segments; ++i)
        REQUIRE(same(back->data() + 2000 * i, local->data() + 1000 * i + i, 100 + 50 * i));
    CHECK(total > 0);

    // Inject: no completion; the data is visible to a later read.
    const std::size_t n = std::min<std::size_t>(ep.inject_size(), 32);
    REQUIRE(n > 0);
    std::vector<std::byte> small(n, std::byte{0x5a});
    ep.write_inject(small, remote, 4000, p.client.peer());
    p.client.read(back->slice(0, n), remote, 4000, &ctx);
    (void)ep.wait(&ctx, soon());
    REQUIRE(same(back->data(), small.data(), n));
}

TEST_CASE("matrix: read_ranges reads several ranges of one region in one operation",
          "[matrix][rma][sg]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(1 << 16, Access::remote_read_write);
    test::fill_pattern(target->bytes(), 9);
    const RemoteRegion remote = target->remote();
    Endpoint& ep = p.client.endpoint();
    const std::size_t limit = ep.read_ranges_limit();
    REQUIRE(limit >= 1);
    CHECK(p.client.read_ranges_limit() == limit);
    auto sink = p.client.allocate(1 << 16, Access::local);
    std::memset(sink->data(), 0xee, sink->size());
    // Remote ranges out of order and of different lengths (one past a page
    // edge), each into its own local range with untouched bytes between.
    const std::size_t offsets[] = {40000, 7, 4090, 20001};
    const std::size_t lengths[] = {4200, 1, 64, 999};
    const std::size_t n = std::min<std::size_t>(limit, 4);
    std::vector<Endpoint::Read> reads;
    for (std::size_t i = 0; i < n; ++i)
        reads.push_back({sink->slice(10000 * i + 3, lengths[i]), offsets[i]});
    int ctx = 0;
    p.client.read_ranges(reads, remote, &ctx); // the Connection's, then the Endpoint's below
    const Completion done = ep.wait(&ctx, soon());
    CHECK(done.op == Op::read);
    // One operation: one completion, nothing more for it.
    for (const auto until = Deadline::after(std::chrono::milliseconds(50)); !until.expired();)
        if (const auto extra = ep.poll_one())
            FAIL("a second completion for one read_ranges (op " << static_cast<int>(extra->op) << ")");
    for (std::size_t i = 0; i < n; ++i) {
        INFO("range " << i << " of " << n);
        REQUIRE(same(sink->data() + 10000 * i + 3, target->data() + offsets[i], lengths[i]));
        CHECK(sink->data()[10000 * i + 2] == std::byte{0xee});
        CHECK(sink->data()[10000 * i + 3 + lengths[i]] == std::byte{0xee});
    }

    // More ranges than one read takes, an empty range, a range past the region:
    // refused before anything is posted, saying which.
    std::vector<Endpoint::Read> too_many(limit + 1, Endpoint::Read{sink->slice(0, 8), 0});
    CHECK_THROWS_WITH(ep.read_ranges(too_many, remote, &ctx, p.client.peer()),
                      Catch::Contains("one read on this endpoint takes 1 to " + std::to_string(limit)));
    const Endpoint::Read empty[] = {{sink->slice(0, 0), 0}};
    CHECK_THROWS_AS(ep.read_ranges(empty, remote, &ctx, p.client.peer()), UsageError);
    // A good range, then one past the region: refused, naming the second, and
    // the first not read either.
    std::memset(sink->data(), 0xee, 64);
    const Endpoint::Read past[] = {{sink->slice(0, 8), 0}, {sink->slice(8, 8), (1 << 16) - 4}};
    if (limit >= 2) {
        CHECK_THROWS_WITH(ep.read_ranges(past, remote, &ctx, p.client.peer()),
                          Catch::Contains("range 1") && Catch::Contains("nothing was posted"));
        for (const auto until = Deadline::after(std::chrono::milliseconds(50)); !until.expired();)
            if (ep.poll_one())
                FAIL("a refused read_ranges completed");
        CHECK(sink->data()[0] == std::byte{0xee});
    }
    CHECK_THROWS_AS(ep.read_ranges(std::span(past).last(1), remote, &ctx, p.client.peer()), UsageError);
    // Still usable: one more read, through the Node's call.
    const Endpoint::Read one[] = {{sink->slice(0, 16), 100}};
    CHECK(p.client.node().read_ranges_limit(p.client.peer_id()) == limit);
    p.client.node().read_ranges(p.client.peer_id(), one, remote, &ctx);
    (void)p.client.node().wait(&ctx, soon());
    REQUIRE(same(sink->data(), target->data() + 100, 16));
}
