// SPDX-License-Identifier: MIT
// Misuse that used to crash or return nonsense now gets a clear error, and
// memory an operation uses outlives the caller's handle to it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "support/cases.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// The message of the `E` that `f` throws, or what went otherwise.
template <class E, class F>
std::string thrown(F&& f)
{
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("another exception: ") + e.what();
    }
    return "nothing thrown";
}

} // namespace

TEST_CASE("lifetimes: a region dropped while a read into it is in flight stays until it completes",
          "[lifetimes][rma]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    constexpr std::size_t size = 4u << 20;
    auto target = p.expose(size, Access::remote_read_write);
    test::fill_pattern(target->bytes(), 9);
    const RemoteRegion remote = target->remote();
    int rctx = 0;
    int wctx = 0;
    std::weak_ptr<MemoryRegion> sink_seen;
    std::weak_ptr<MemoryRegion> source_seen;
    {
        auto sink = p.client.allocate(size, Access::local);
        auto source = p.client.allocate(size, Access::local);
        sink_seen = sink;
        source_seen = source;
        p.client.read(sink->slice(0, size), remote, 0, &rctx);
        p.client.write(source->slice(0, size), remote, 0, &wctx);
    } // the caller's handles are gone; the operations are not
    CHECK_FALSE(sink_seen.expired());
    CHECK_FALSE(source_seen.expired());
    (void)p.client.wait(&rctx, soon());
    (void)p.client.wait(&wctx, soon());
    // Idle now: closing the endpoint lets the regions go.
    p.client.endpoint().close();
    CHECK(sink_seen.expired());
    CHECK(source_seen.expired());
}

TEST_CASE("lifetimes: a read into a read-only mapping is refused before it is posted",
          "[lifetimes][bad-input]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    const std::string path = fmt::format("/tmp/weft-ro-{}.bin", ::getpid());
    std::ofstream(path) << std::string(4096, 'x');
    auto ro = MemoryRegion::map_file(p.client.domain(), path, Access::remote_read,
                                     &p.client.endpoint());
    std::remove(path.c_str());
    CHECK(ro->read_only());
    int ctx = 0;
    CHECK_THAT(thrown<UsageError>([&] { (void)p.client.read(ro->slice(0, 64), target->remote(), 0, &ctx); }),
               Catch::Contains("read-only mapping"));
    // As a source it is fine (read back: a completed write is seen by a read).
    p.client.write(ro->slice(0, 64), target->remote(), 0, &ctx);
    (void)p.client.wait(&ctx, soon());
    auto back = p.client.allocate(64, Access::local);
    p.client.read(back->slice(0, 64), target->remote(), 0, &ctx);
    (void)p.client.wait(&ctx, soon());
    CHECK(back->data()[0] == std::byte{'x'});
}

TEST_CASE("lifetimes: sizes that cannot be allocated are refused with the size",
          "[lifetimes][bad-input]")
{
    const test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto domain = test::domain_for(c);
    for (const std::size_t size : {SIZE_MAX, SIZE_MAX - 4095}) {
        INFO(size);
        CHECK_THAT(thrown<UsageError>([&] { (void)MemoryRegion::allocate(domain, size, Access::local); }),
               Catch::Contains(std::to_string(size)));
    }
    // More than memory and swap: weft's error with the size, not std::bad_alloc.
    const std::size_t huge = std::size_t{1} << 46; // 64 TiB
    try {
        (void)MemoryRegion::allocate(domain, huge, Access::local);
        FAIL("64 TiB were allocated");
    } catch (const UsageError&) {
        FAIL("refused as a usage error");
    } catch (const Error& e) {
        CHECK(e.code() == -FI_ENOMEM);
        CHECK_THAT(e.what(), Catch::Contains(std::to_string(huge)));
    }
}

TEST_CASE("lifetimes: deadlines saturate, and a deadline already past is named as such",
          "[lifetimes][deadline]")
{
    CHECK_FALSE(Deadline::after(Clock::duration::max()).expired());
    CHECK_FALSE(Deadline::never().expired());
    CHECK(Deadline::never().remaining_ms() > 0);
    CHECK(Deadline::after(-1s).expired());

    const test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto p = test::connect_pair(c);
    const Deadline past = Deadline::after(-1s);
    CHECK_THAT(thrown<TimeoutError>([&] { (void)p.client.endpoint().wait_for(Op::notify, past); }),
               Catch::Contains("had already passed"));
    CHECK_THAT(thrown<TimeoutError>([&] { (void)p.client.side().receive(detail::Frame::data, past); }),
               Catch::Contains("had already passed"));
    // A live deadline still blames what it waited for.
    CHECK_THAT(thrown<TimeoutError>([&] { (void)p.client.side().receive(detail::Frame::data, Deadline::after(100ms)); }),
               Catch::Contains("silent"));
}
