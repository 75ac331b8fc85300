// SPDX-License-Identifier: MIT
// The buffer pool (blocks loaned once, shared by threads, a data-path source)
// and the registration cache (hits by owner, never stale, moves data).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

TEST_CASE("buffer pool: blocks are loaned once and come back", "[pool]")
{
    auto pool = BufferPool::create(test::domain_for({"tcp", EndpointKind::msg}), 4000, 64);
    CHECK(pool->block_size() == 4032); // rounded to 64
    CHECK(pool->available() == 64);
    std::vector<BufferPool::Block> held;
    std::set<std::byte*> seen;
    while (auto b = pool->try_get()) {
        CHECK(seen.insert(b->data()).second);
        CHECK(b->local().desc == pool->region().desc());
        CHECK(b->offset() % pool->block_size() == 0);
        held.push_back(std::move(*b));
    }
    CHECK(held.size() == 64);
    CHECK(pool->available() == 0);
    CHECK_FALSE(pool->try_get().has_value());
    held.clear();
    CHECK(pool->available() == 64);
}

TEST_CASE("buffer pool: threads share it without locks or double loans", "[pool][threads]")
{
    auto pool = BufferPool::create(test::domain_for({"tcp", EndpointKind::msg}), 64, 16);
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20000; ++i) {
                auto b = pool->try_get();
                if (!b)
                    continue;
                std::memset(b->data(), t + 1, 64);
                std::this_thread::yield();
                for (std::size_t k = 0; k < 64; ++k)
                    if (b->data()[k] != std::byte(t + 1))
                        ++errors; // someone else holds the same block
            }
        });
    for (auto& th : threads)
        th.join();
    CHECK(errors == 0);
    CHECK(pool->available() == 16);
}

TEST_CASE("buffer pool: a block is a data-path source", "[pool][rma]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto p = test::connect_pair(c);
    auto pool = BufferPool::create(p.client.domain(), 4096, 8);
    auto target = p.expose(4096, Access::remote_write);
    auto b = pool->try_get();
    REQUIRE(b);
    test::fill_pattern({b->data(), 4096}, 9);
    int ctx = 0;
    p.client.write_notify(b->slice(0, 4096), target->remote(), 0, 1, &ctx);
    (void)p.server.endpoint().wait_for(Op::notify, soon());
    CHECK(std::memcmp(target->data(), b->data(), 4096) == 0);
    (void)p.client.endpoint().wait(&ctx, soon());
}

TEST_CASE("registration cache: hits by owner, never stale", "[cache]")
{
    RegistrationCache cache(test::domain_for({"tcp", EndpointKind::msg}), Access::local, 4);
    auto a = std::make_shared<std::vector<std::byte>>(8192);
    const Local first = cache.get(a, *a);
    const Local again = cache.get(a, std::span(*a).subspan(100, 1000)); // inside: a hit
    CHECK(cache.stats().hits == 1);
    CHECK(cache.stats().misses == 1);
    CHECK(again.desc == first.desc);
    CHECK(again.addr == a->data() + 100);

    // Free it and allocate again: whatever the address, the new owner misses.
    const void* old_address = a->data();
    a.reset();
    auto b = std::make_shared<std::vector<std::byte>>(8192);
    INFO("reused address: " << (b->data() == old_address));
    (void)cache.get(b, *b);
    CHECK(cache.stats().misses == 2);
    CHECK(cache.stats().evictions >= 1); // the expired owner's entry is gone
    CHECK(cache.size() == 1);

    // Capacity: the least recently used live entry goes.
    std::vector<std::shared_ptr<std::vector<std::byte>>> owners;
    for (int i = 0; i < 6; ++i) {
        owners.push_back(std::make_shared<std::vector<std::byte>>(4096));
        (void)cache.get(owners.back(), *owners.back());
    }
    CHECK(cache.size() <= 4);
    CHECK_THROWS_AS(cache.get(nullptr, *owners[0]), UsageError);
}

TEST_CASE("registration cache: a cached registration moves data", "[cache][rma]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto p = test::connect_pair(c);
    RegistrationCache cache(p.client.domain());
    auto target = p.expose(1 << 16, Access::remote_write);
    auto buf = std::make_shared<std::vector<std::byte>>(1 << 16);
    int ctx = 0;
    for (int i = 0; i < 3; ++i) {
        test::fill_pattern(*buf, static_cast<std::uint64_t>(i));
        p.client.write_notify(cache.get(buf, *buf), target->remote(), 0, 1, &ctx);
        (void)p.server.endpoint().wait_for(Op::notify, soon());
        (void)p.client.endpoint().wait(&ctx, soon());
        CHECK(std::memcmp(target->data(), buf->data(), buf->size()) == 0);
    }
    CHECK(cache.stats().misses == 1);
    CHECK(cache.stats().hits == 2);
}
