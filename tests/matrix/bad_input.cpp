// SPDX-License-Identifier: MIT
// Bad input on every cell: a wrong key, out of bounds, an oversized message.
// Each gives its specific error; no crash, no hang.
#include <catch2/catch.hpp>

#include <cstring>

#include <rdma/fi_errno.h>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

TEST_CASE("bad input: wrong key, out of bounds, oversized message", "[matrix][bad-input]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(4096, Access::remote_read_write);
    std::memset(target->data(), 0x33, 4096);
    const RemoteRegion remote = target->remote();
    auto src = p.client.allocate(8192, Access::local);
    std::memset(src->data(), 0x44, 8192);
    Endpoint& ep = p.client.endpoint();
    int ctx = 0;

    SECTION("wrong key: the provider rejects it and weft reports the completion error")
    {
        const RemoteRegion wrong(remote.base(), remote.length(), remote.key() ^ 0x5a5a5a5aull,
                                 remote.flags());
        const Quirks& q = ep.quirks();
        ep.read(src->slice(0, 256), wrong, 0, &ctx, p.client.peer());
        if (q.keys_unchecked) {
            // Measured, and recorded in the provider's traits: shm's direct
            // path never consults the target, so the read succeeds. Should
            // shm start checking keys, this fails and the trait must go.
            WARN(c.label() << " does not check remote keys (Quirks::keys_unchecked)");
            CHECK(ep.wait(&ctx, soon()).op == Op::read);
        } else if (q.remote_errors_silent) {
            WARN(c.label() << " drops refused RMA silently (Quirks::remote_errors_silent)");
            try {
                (void)ep.wait(&ctx, Deadline::after(2s));
                FAIL("a read with a wrong key completed");
            } catch (const TimeoutError& e) {
                CHECK_THAT(e.what(), Catch::Contains("drops a refused RMA"));
            }
        } else {
            try {
                (void)ep.wait(&ctx, soon());
                FAIL("a read with a wrong key completed");
            } catch (const TimeoutError&) {
                FAIL("a read with a wrong key hung until the deadline");
            } catch (const Error& e) {
                CHECK(e.code() < 0);
                CHECK(e.provider() == p.client.selection().provider());
                CHECK(std::string(e.what()).find("provider says") != std::string::npos);
            }
        }
        CHECK(target->data()[0] == std::byte{0x33});
    }
    SECTION("out of bounds: refused before any traffic")
    {
        CHECK_THROWS_AS(p.client.write(src->slice(0, 4097), remote, 0, &ctx), UsageError);
        CHECK_THROWS_AS(p.client.write(src->slice(0, 8), remote, 4090, &ctx), UsageError);
        CHECK_THROWS_AS(p.client.read(src->slice(0, 1), remote, 4096, &ctx), UsageError);
        CHECK_THROWS_AS(src->slice(8000, 500), UsageError);
        CHECK_FALSE(ep.poll_one().has_value());
        CHECK(target->data()[4095] == std::byte{0x33});
    }
    SECTION("a message larger than the peer's receive slots")
    {
        auto big = p.client.allocate(ep.max_message() + 1, Access::local);
        try {
            p.client.send(big->all(), &ctx);
            FAIL("oversized message was sent");
        } catch (const UsageError& e) {
            CHECK(e.code() == -FI_EMSGSIZE);
            CHECK_THAT(e.what(), Catch::Contains("slot_size"));
        }
    }
}
