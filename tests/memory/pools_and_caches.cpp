// SPDX-License-Identifier: MIT
// Buffer pool, registration cache, batched writes, progress-thread placement,
// NUMA placement, and zero-copy file regions.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "traits.hpp"
#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

namespace {


std::shared_ptr<Domain> tcp_domain(Options o = {})
{
    auto sel = select(test::options_for({"tcp", EndpointKind::msg}, o));
    return Domain::open(Fabric::open(sel.info()), sel.info());
}

} // namespace

TEST_CASE("buffer pool: blocks are loaned once and come back", "[pool]")
{
    auto pool = BufferPool::create(tcp_domain(), 4000, 64);
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
    auto pool = BufferPool::create(tcp_domain(), 64, 16);
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
    RegistrationCache cache(tcp_domain(), Access::local, 4);
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

TEST_CASE("batched writes: one chain, a completion every N", "[matrix][batch]")
{
    const auto c = test::each_cell();
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
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

TEST_CASE("progress thread: pinned where asked", "[progress][threads]")
{
    test::Case c{"tcp", EndpointKind::msg};
    Options o;
    o.progress = Progress::thread;
    o.progress_cpu = 0;
    WEFT_REQUIRE_CELL(c, o);
    auto p = test::connect_pair(c, o);
    REQUIRE(p.client.endpoint().progress_thread());
    // The threads name and pin themselves as they start: look until both did.
    int pinned = 0;
    std::vector<std::string> cpus;
    for (const auto until = Deadline::after(std::chrono::seconds(5)); !until.expired();) {
        pinned = 0;
        cpus.clear();
        if (DIR* d = opendir("/proc/self/task")) {
            while (dirent* e = readdir(d)) {
                const std::string task = std::string("/proc/self/task/") + e->d_name;
                std::string comm;
                std::ifstream(task + "/comm") >> comm;
                if (comm != "weft-progress")
                    continue;
                std::ifstream status(task + "/status");
                for (std::string line; std::getline(status, line);)
                    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
                        cpus.push_back(line.substr(line.find_last_of(" \t") + 1));
                        pinned += cpus.back() == "0";
                    }
            }
            closedir(d);
        }
        if (pinned == 2)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    INFO("weft-progress threads allowed on CPUs: " << fmt::format("{}", fmt::join(cpus, " | ")));
    CHECK(pinned == 2); // one per endpoint of the pair
}

TEST_CASE("placement: memory near the device", "[numa]")
{
    auto domain = tcp_domain();
    auto mr = MemoryRegion::allocate(domain, 1 << 20, Access::local, nullptr, Placement::near_device);
    const int device = providers::numa_node(domain->info().get());
    const int got = mr->numa_node();
    INFO("device node " << device << ", memory on node " << got);
    CHECK(got >= 0); // the kernel reports where the pages are
    if (device >= 0)
        CHECK(got == device);
    else
        WARN("the device reports no NUMA node here (" << domain->info().domain_name()
                                                      << "): placement falls back to anywhere");
}

TEST_CASE("file regions: peers read an mmap'ed file, no copy", "[file][rma]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    char path[] = "/tmp/weft-file-XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    std::vector<std::byte> content((1u << 20) + 7);
    test::fill_pattern(content, 123);
    REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    auto p = test::connect_pair(c);
    auto file = MemoryRegion::map_file(p.server.domain(), path);
    p.exposed.push_back(file);
    CHECK(file->size() == content.size());
    const RemoteRegion remote = file->remote();
    CHECK(remote.is_readable());
    CHECK_FALSE(remote.is_writable());
    auto sink = p.client.allocate(content.size(), Access::local);
    int ctx = 0;
    p.client.read(sink->all(), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), content.data(), content.size()) == 0);
    // The registration is the mapping itself: a change to the file shows.
    const char patch[] = "weft";
    REQUIRE(pwrite(fd, patch, 4, 1000) == 4);
    p.client.read(sink->slice(0, 4), remote, 1000, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    CHECK(std::memcmp(sink->data(), patch, 4) == 0);
    close(fd);
    unlink(path);
}
