// SPDX-License-Identifier: MIT
// `weft bench`'s local micro-benchmarks over weft's API: no peer, only a
// domain (the registration cache, the buffer pool).
#include "weft_ends.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/weft.hpp"

namespace weft::bench {

using namespace std::chrono;

int run_weft_local(const Config& cfg)
{
    Options o = options_for(cfg);
    const Selection sel = select(o);
    auto domain = Domain::open(Fabric::open(sel.info()), sel.info());
    const auto sizes = cfg.sizes.empty() ? std::vector<std::size_t>{4096, 65536} : cfg.sizes;
    const std::uint64_t n = cfg.iterations ? cfg.iterations : 2000;
    nlohmann::json rows = nlohmann::json::array();
    auto report = [&](const std::string& what, std::size_t size, std::uint64_t iters, double s) {
        rows.push_back({{"operation", what}, {"bytes", size}, {"iterations", iters},
                        {"seconds", s}, {"usec_per_op", s * 1e6 / static_cast<double>(iters)}});
        if (!cfg.json)
            std::printf("%-26s %8zu %10llu %12.3f\n", what.c_str(), size,
                        static_cast<unsigned long long>(iters), s * 1e6 / static_cast<double>(iters));
    };
    if (!cfg.json)
        std::printf("# weft %s (%s %s)\n%-26s %8s %10s %12s\n", std::string(to_string(cfg.pattern)).c_str(),
                    std::string(sel.provider()).c_str(), std::string(weft::to_string(sel.kind())).c_str(),
                    "operation", "bytes", "iters", "usec/op");
    for (const std::size_t size : sizes) {
        if (cfg.pattern == Pattern::reg_cache) {
            // A hit: the owner's registration is found. A miss: a new owner of
            // the same bytes, so a registration (and, at capacity, an eviction).
            auto memory = std::make_shared<std::vector<std::byte>>(size);
            RegistrationCache cache(domain, Access::local, 64);
            (void)cache.get(memory, *memory);
            auto t0 = steady_clock::now();
            for (std::uint64_t i = 0; i < n; ++i)
                (void)cache.get(memory, *memory);
            report("reg-cache hit", size, n, duration<double>(steady_clock::now() - t0).count());
            std::vector<std::shared_ptr<const void>> owners;
            for (std::uint64_t i = 0; i < n; ++i)
                owners.emplace_back(memory->data(), [keep = memory](const void*) {}); // same bytes, a new owner each
            t0 = steady_clock::now();
            for (std::uint64_t i = 0; i < n; ++i)
                (void)cache.get(owners[i], *memory);
            report("reg-cache miss", size, n, duration<double>(steady_clock::now() - t0).count());
            t0 = steady_clock::now();
            for (std::uint64_t i = 0; i < n; ++i)
                (void)MemoryRegion::register_memory(domain, *memory, Access::local);
            report("register + deregister", size, n, duration<double>(steady_clock::now() - t0).count());
        } else {
            auto pool = BufferPool::create(domain, size, 1024);
            auto t0 = steady_clock::now();
            for (std::uint64_t i = 0; i < n * 100; ++i)
                (void)pool->try_get();
            report("pool get+return, 1 thread", size, n * 100, duration<double>(steady_clock::now() - t0).count());
            t0 = steady_clock::now();
            std::thread other([&] {
                for (std::uint64_t i = 0; i < n * 100; ++i)
                    (void)pool->try_get();
            });
            for (std::uint64_t i = 0; i < n * 100; ++i)
                (void)pool->try_get();
            other.join();
            report("pool get+return, 2 threads", size, n * 200, duration<double>(steady_clock::now() - t0).count());
        }
    }
    if (cfg.json)
        std::printf("%s\n", nlohmann::json{{"tool", "weft"}, {"pattern", to_string(cfg.pattern)},
                                           {"rows", rows}}.dump().c_str());
    return 0;
}

} // namespace weft::bench
