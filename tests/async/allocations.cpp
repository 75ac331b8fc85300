// SPDX-License-Identifier: MIT
// Nothing is allocated per awaited operation or per Transfer::post once warm:
// this program counts operator new on the thread under test, at 1 and 64
// operations in flight.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "async/support.hpp"

// malloc and free under operator new and delete: GCC cannot see that they pair.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#if defined(__SANITIZE_ADDRESS__)
// Under ASan, what its runtime allocated before this program's operator new
// took over (Catch's registrations) is freed here with free(): a mix this
// program makes on purpose, and ASan's alloc-dealloc check would stop it.
extern "C" const char* __asan_default_options()
{
    return "alloc_dealloc_mismatch=0";
}
#endif

namespace {
thread_local bool counting = false;
std::atomic<std::size_t> allocations{0};
} // namespace

void* operator new(std::size_t n)
{
    if (counting)
        allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1))
        return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace weft;
using weft::test::Fleet;
using weft::test::soon;

namespace {

/// Allocations on this thread while `body` runs.
template <class Body>
std::size_t counted(Body&& body)
{
    const std::size_t before = allocations.load();
    counting = true;
    body();
    counting = false;
    return allocations.load() - before;
}

Task<int> writes(Node& hub, PeerId p, Local src, RemoteRegion dst, int n)
{
    int done = 0;
    for (int i = 0; i < n; ++i)
        done += (co_await hub.write(p, src, dst, 0, soon())).op == Op::write;
    co_return done;
}

} // namespace

TEST_CASE("async: no allocation per awaited operation or per Transfer::post once warm",
          "[async][allocations]")
{
    const test::Case c = GENERATE(test::Case{"tcp", EndpointKind::msg},
                                  test::Case{"shm", EndpointKind::rdm});
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    Fleet f(test::options_for(c), 1, 1 << 20);
    auto src = f.hub->allocate(1 << 20, Access::local);
    const int in_flight = GENERATE(1, 64);
    INFO(in_flight << " in flight");
    // 4 KiB writes (not injected: each one suspends and is resumed by dispatch).
    const auto round = [&](int n) {
        std::vector<Task<int>> tasks;
        for (int i = 0; i < in_flight; ++i)
            tasks.push_back(writes(*f.hub, f.ids[0], src->slice(4096u * i, 4096),
                                   f.regions[0]->remote(), n));
        return tasks;
    };
    auto warm = round(50);
    for (auto& t : warm)
        t.start();
    f.drive([&] { return std::all_of(warm.begin(), warm.end(), [](auto& t) { return t.done(); }); });
    auto measured = round(200); // frames made before counting starts
    const std::size_t during = counted([&] {
        for (auto& t : measured)
            t.start();
        f.drive([&] {
            return std::all_of(measured.begin(), measured.end(), [](auto& t) { return t.done(); });
        });
    });
    for (auto& t : measured)
        CHECK(t.result() == 200);
    CHECK(during == 0);

    std::vector<TransferEntry> entries;
    for (int i = 0; i < in_flight; ++i)
        entries.push_back({f.ids[0], src->slice(4096u * i, 4096), f.regions[0]->remote(),
                           4096u * i});
    auto t = Transfer::prepare(f.hub, Direction::write, entries, Notify{.enabled = true});
    // The target takes its notifications as they come (kept, they would grow its queue).
    auto taking = [](Node& n, PeerId from) -> Task<int> {
        int got = 0;
        for (int i = 0; i < 210; ++i)
            got += (co_await n.notification(from, soon())).op == Op::notify;
        co_return got;
    }(*f.targets[0], f.hub_at[0]);
    taking.start();
    for (int i = 0; i < 10; ++i) {
        t.post();
        f.drive([&] { return t.status().state != Transfer::State::in_flight; });
    }
    const std::size_t posting = counted([&] {
        for (int i = 0; i < 200; ++i) {
            t.post();
            f.drive([&] { return t.status().state != Transfer::State::in_flight; });
        }
    });
    f.drive([&] { return taking.done(); });
    CHECK(taking.result() == 210);
    CHECK(t.status().state == Transfer::State::done);
    CHECK(posting == 0);
}
