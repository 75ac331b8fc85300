// SPDX-License-Identifier: MIT
// Access a region does not grant is refused by the provider, on every cell: a
// revoked region, a read-only region's descriptor forged writable, a guessed
// key. Where a provider cannot refuse (its Quirks say so), the test says so.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/thrown.hpp"

using namespace weft;
using weft::test::all_equal;
using weft::test::soon;
using weft::test::thrown;
using namespace std::chrono_literals;

namespace {

/// Posts a write the target should refuse, then, `pause` after its completion,
/// a read of `fence` (which completes only after the write was handled:
/// read-after-write). True when either reported an error; a provider that
/// drops refused RMA silently (Quirks::remote_errors_silent) may report nothing.
bool refused(test::Pair& p, const std::function<void(void*)>& post, const RemoteRegion& fence,
             std::chrono::milliseconds pause = {})
{
    // Through the Connection, not a cached Endpoint&: where the provider
    // answers a refusal by closing the connection (tcp, net), the Node
    // connects again on a new endpoint.
    const bool silent = p.client.endpoint().quirks().remote_errors_silent;
    // Outlives the connection: when the write's error surfaces first, the
    // fence read may still be in flight (sockets lands it later, measured).
    auto sink = p.exposed.emplace_back(p.client.allocate(64, Access::remote_write));
    int ctx = 0;
    try {
        post(&ctx);
        (void)p.client.wait(&ctx, silent ? Deadline::after(2s) : soon());
        std::this_thread::sleep_for(pause);
        p.client.read(sink->slice(0, 8), fence, 0, &ctx);
        (void)p.client.wait(&ctx, silent ? Deadline::after(2s) : soon());
        // sockets reports the refusal after the fence's own completion (its
        // write completes on send, the error comes back on its own): allow it
        // a moment to arrive.
        for (const auto until = Clock::now() + 2s; Clock::now() < until;)
            (void)p.client.node().poll_one();
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
    const Quirks q = p.client.endpoint().quirks(); // a copy: the endpoint may be replaced
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
    else if (q.refusal_lost_on_reconnect && !reported)
        WARN(p.client.selection().provider()
             << ": " << what << " was refused, and the refusal lost in a reconnect "
                                "(Quirks::refusal_lost_on_reconnect)");
    else
        CHECK(reported);
    CHECK(all_equal(victim, n, original));
}

} // namespace

TEST_CASE("misuse: a revoked region refuses local use and remote access", "[matrix][edges][revoke]")
{
    WEFT_EACH_CELL(c);
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
    WEFT_EACH_CELL(c);
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

TEST_CASE("misuse: where RDM reconnects behind a refusal, it may be lost when the next operation "
          "comes after the reconnect, and elsewhere it is reported all the same",
          "[matrix][edges][revoke]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    const Quirks& q = p.client.endpoint().quirks();
    if (q.keys_unchecked || q.remote_errors_silent) {
        WARN(c.label() << ": refusals are never seen here (Quirks::keys_unchecked or "
                          "remote_errors_silent): nothing to lose");
        return;
    }
    auto writable = p.expose(4096, Access::remote_read_write);
    std::memset(writable->data(), 0x33, 4096);
    const RemoteRegion w = writable->remote();
    const RemoteRegion forged(w.base(), w.length(), w.key() + 1, w.flags());
    auto src = p.exposed.emplace_back(p.client.allocate(64, Access::local));
    std::memset(src->data(), 0x44, 64);
    auto fence = p.expose(64, Access::remote_read);
    // The target refuses the write and closes the connection; 200 ms later the
    // next operation goes out. Without Quirks::refusal_lost_on_reconnect the
    // refusal must be reported; with it, it may be lost (over TCP in every
    // run, on soft-iWARP in some), and which happened is said. Either way the
    // refused bytes never land.
    const bool reported = refused(
        p, [&](void* x) { p.client.write(src->all(), forged, 0, x); }, fence->remote(), 200ms);
    if (q.refusal_lost_on_reconnect)
        WARN(c.label() << ": the refusal was " << (reported ? "reported this time" : "lost")
                       << " (Quirks::refusal_lost_on_reconnect: it may be lost)");
    else
        CHECK(reported);
    CHECK(all_equal(writable->data(), 4096, std::byte{0x33}));
}

TEST_CASE("misuse: a refused write that the provider answers by closing the connection is told "
          "as refused, not as a lost peer, and the next operation works",
          "[matrix][edges][revoke][privilege]")
{
    // tcp completes a write on send; its target refuses a bad key or range by
    // closing the connection. The peer is alive: the refusal is reported by
    // the next operation, naming the write, and the one after it reconnects.
    const test::Case c = GENERATE(test::Case{"tcp", EndpointKind::msg},
                                  test::Case{"net", EndpointKind::msg});
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    auto p = test::connect_pair(c);
    auto ro = p.expose(4096, Access::remote_read);
    auto rw = p.expose(4096, Access::remote_read_write);
    auto gone = p.expose(4096, Access::remote_read_write);
    std::memset(ro->data(), 0x33, 4096);
    std::memset(rw->data(), 0x33, 4096);
    std::memset(gone->data(), 0x33, 4096);
    const RemoteRegion r = ro->remote();
    const RemoteRegion g = gone->remote();
    const RemoteRegion w = rw->remote();
    REQUIRE(gone->revoke());
    auto src = p.exposed.emplace_back(p.client.allocate(4096, Access::local));
    auto back = p.exposed.emplace_back(p.client.allocate(4096, Access::local));
    std::memset(src->data(), 0x44, 4096);
    const test::Target passive([&](const std::atomic<bool>& done) {
        while (!done)
            p.server.node().progress();
    });
    struct Bad {
        const char* what;
        RemoteRegion region;
    };
    const Bad cases[] = {
        {"a read-only region's descriptor forged writable",
         RemoteRegion(r.base(), r.length(), r.key(), r.flags() | RemoteRegion::writable)},
        {"a write after the target's revoke()", g},
        {"a forged huge length", RemoteRegion(w.base(), std::uint64_t{1} << 40, w.key(), w.flags())},
    };
    for (const Bad& bad : cases) {
        INFO(bad.what);
        int ctx = 0;
        const std::size_t len = &bad == &cases[2] ? 4096 : 64;
        const std::uint64_t off = &bad == &cases[2] ? (std::uint64_t{1} << 39) : 0;
        std::optional<Error> said;
        Endpoint& before = p.client.endpoint(); // replaced by the reconnect, kept closed
        try {
            p.client.write(src->slice(0, len), bad.region, off, &ctx);
            (void)p.client.wait(&ctx, soon());
            // The refusal comes back as the connection closing: the next
            // operation says so (within a second: the Node reads its events).
            for (const auto until = Clock::now() + 5s; Clock::now() < until && !said;) {
                try {
                    p.client.read(back->slice(0, 8), w, 0, &ctx);
                    (void)p.client.wait(&ctx, soon());
                    std::this_thread::sleep_for(10ms);
                } catch (const Error& e) {
                    said = e;
                }
            }
        } catch (const Error& e) {
            said = e;
        }
        REQUIRE(said);
        INFO(said->what());
        CHECK_FALSE(said->peer_lost());
        CHECK_THAT(said->what(), Catch::Contains("refuse"));
        CHECK_THAT(said->what(), Catch::Contains(fmt::format("{:#x}", bad.region.key())));
        CHECK_FALSE(p.client.node().is_lost(p.client.peer_id()));
        // An Endpoint& taken before is still an object (ASan would say): closed
        // once the connection was replaced, its calls refused by name.
        if (before.closed())
            CHECK_THAT(thrown<UsageError>([&] { (void)before.poll_one(); }),
                       Catch::Contains("endpoint is closed"));
        // The next operations work: a write and a read of it.
        std::memset(src->data(), 0x55, 64);
        p.client.write(src->slice(0, 64), w, 128, &ctx);
        (void)p.client.wait(&ctx, soon());
        p.client.read(back->slice(0, 64), w, 128, &ctx);
        (void)p.client.wait(&ctx, soon());
        CHECK(all_equal(back->data(), 64, std::byte{0x55}));
        std::memset(src->data(), 0x44, 4096);
    }
    // The refused writes touched nothing.
    CHECK(all_equal(ro->data(), 4096, std::byte{0x33}));
    CHECK(all_equal(gone->data(), 4096, std::byte{0x33}));
    CHECK(all_equal(rw->data(), 128, std::byte{0x33}));
    CHECK(all_equal(rw->data() + 192, 4096 - 192, std::byte{0x33}));
}

TEST_CASE("misuse: on shm, which checks no bounds, a forged out-of-range write fails naming the "
          "cause, not a bare I/O error",
          "[matrix][edges][privilege]")
{
    const test::Case c{"shm", EndpointKind::rdm};
    WEFT_REQUIRE_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    const RemoteRegion w = target->remote();
    // A descriptor claiming 256 TiB, written 128 TiB in: past the top of a
    // process's address space on x86-64 (47 bits; mapped with 5-level paging
    // only where asked for), so the kernel's copy fails in any build. (512 GiB
    // in was mapped memory under ASan, whose allocator reserves 4 TiB.)
    const RemoteRegion forged(w.base(), std::uint64_t{1} << 48, w.key(), w.flags());
    auto src = p.exposed.emplace_back(p.client.allocate(65536, Access::local));
    int ctx = 0;
    try {
        p.client.write(src->all(), forged, std::uint64_t{1} << 47, &ctx);
        (void)p.client.wait(&ctx, soon());
        FAIL("a write to unmapped memory of the target completed");
    } catch (const Error& e) {
        INFO(e.what());
        CHECK_FALSE(e.peer_lost());
        CHECK_THAT(e.what(), Catch::Contains("outside the memory the target process has mapped"));
    }
}
