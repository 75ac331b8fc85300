// SPDX-License-Identifier: MIT
// Misuse that used to crash or return nonsense now gets a clear error, and
// memory an operation uses outlives the caller's handle to it.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <thread>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/thrown.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;
using weft::test::thrown;

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

namespace {
// In .rodata: the process cannot write it.
alignas(4096) const std::array<std::uint8_t, 8192> constant_bytes = [] {
    std::array<std::uint8_t, 8192> a{};
    for (std::size_t i = 0; i < a.size(); ++i)
        a[i] = static_cast<std::uint8_t>(i * 7 + 1);
    return a;
}();
} // namespace

TEST_CASE("lifetimes: read-only memory given to register_memory is a source only: a read into "
          "it and a remote-write export are refused, never a crash",
          "[lifetimes][bad-input]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(8192, Access::remote_read_write);
    std::memset(target->data(), 0x5c, 8192);
    // Two kinds of read-only memory: a static const object, a PROT_READ mapping.
    void* mapped = ::mmap(nullptr, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(mapped != MAP_FAILED);
    const std::span<std::byte> kinds[] = {
        {const_cast<std::byte*>(reinterpret_cast<const std::byte*>(constant_bytes.data())), 8192},
        {static_cast<std::byte*>(mapped), 8192}};
    for (const auto& memory : kinds) {
        auto ro = p.client.register_memory(memory, Access::local);
        CHECK(ro->read_only());
        int ctx = 0;
        CHECK_THAT(thrown<UsageError>([&] { p.client.read(ro->slice(0, 64), target->remote(), 0, &ctx); }),
                   Catch::Contains("read-only memory") && Catch::Contains("nothing was posted"));
        // As a source it works: what it wrote is read back.
        p.client.write(ro->slice(0, 4096), target->remote(), 0, &ctx);
        (void)p.client.wait(&ctx, soon());
        auto back = p.client.allocate(4096, Access::local);
        p.client.read(back->slice(0, 4096), target->remote(), 0, &ctx);
        (void)p.client.wait(&ctx, soon());
        CHECK(std::memcmp(back->data(), memory.data(), 4096) == 0);
        // Peers may read it, never write it.
        CHECK_THAT(thrown<UsageError>([&] { (void)p.client.register_memory(memory, Access::remote_write); }),
                   Catch::Contains("read-only memory"));
        CHECK_THAT(thrown<UsageError>([&] { (void)p.client.register_memory(memory, Access::remote_read_write); }),
                   Catch::Contains("read-only memory"));
        CHECK(p.client.register_memory(memory, Access::remote_read)->read_only());
    }
    // Memory that is not mapped at all is refused by name, not registered.
    ::munmap(mapped, 8192);
    CHECK_THAT(thrown<UsageError>([&] { (void)p.client.register_memory(kinds[1], Access::local); }),
               Catch::Contains("not all mapped"));
}

TEST_CASE("lifetimes: a Local sliced before revoke() is refused after it, even as the region "
          "used last",
          "[lifetimes][bad-input][revoke]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    auto src = p.client.allocate(4096, Access::local);
    auto sink = p.client.allocate(4096, Access::local);
    const Local from = src->slice(0, 64);
    const Local into = sink->slice(0, 64);
    int ctx = 0;
    p.client.write(from, target->remote(), 0, &ctx); // both are the queue's last regions now
    (void)p.client.wait(&ctx, soon());
    p.client.read(into, target->remote(), 0, &ctx);
    (void)p.client.wait(&ctx, soon());
    CHECK(src->revoke());
    CHECK(sink->revoke());
    CHECK_THAT(thrown<UsageError>([&] { p.client.write(from, target->remote(), 0, &ctx); }),
               Catch::Contains("revoked after this Local was sliced"));
    CHECK_THAT(thrown<UsageError>([&] { p.client.read(into, target->remote(), 0, &ctx); }),
               Catch::Contains("revoked after this Local was sliced"));
    // Fresh registrations go on working.
    auto again = p.client.allocate(64, Access::local);
    p.client.write(again->slice(0, 64), target->remote(), 0, &ctx);
    (void)p.client.wait(&ctx, soon());
}

TEST_CASE("lifetimes: a Local of another Node's registration is refused, naming the Node that "
          "registered it",
          "[lifetimes][bad-input][node]")
{
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    auto a = Node::open(o);
    auto b = Node::open_like(o, a->address());
    auto other = Node::open_like(o, a->address());
    const PeerId to_b = a->add_peer(b->address());
    (void)b->add_peer(a->address());
    auto target = b->allocate(4096, Access::remote_read_write);
    auto foreign = other->allocate(4096, Access::local);
    auto mine = a->allocate(4096, Access::local);
    // b is driven by a thread: a MSG peer connects on the first post.
    const test::Target passive([&](const std::atomic<bool>& done) {
        while (!done)
            b->progress();
    });
    int ctx = 0;
    const std::string said =
        thrown<UsageError>([&] { a->write(to_b, foreign->slice(0, 64), target->remote(), 0, &ctx); });
    CHECK_THAT(said, Catch::Contains("registered by Node 0x") && Catch::Contains("nothing was posted"));
    CHECK_THAT(thrown<UsageError>([&] { a->read(to_b, foreign->slice(0, 64), target->remote(), 0, &ctx); }),
               Catch::Contains("registered by Node 0x"));
    // Its own registration works.
    a->write(to_b, mine->slice(0, 64), target->remote(), 0, &ctx);
    (void)a->wait(&ctx, soon());
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
