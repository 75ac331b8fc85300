// SPDX-License-Identifier: MIT
// Bad input: a wrong key, out of bounds, an oversized message on every cell;
// an unreachable peer, an absent provider, an impossible policy. Each gives
// its specific error; no crash, no hang.
#include <catch2/catch.hpp>

#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/sockets.hpp"

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

TEST_CASE("faults: unreachable peer, absent provider, impossible policy", "[bad-input][select]")
{
    SECTION("nothing listens at the server address")
    {
        const std::uint16_t port = test::free_port();
        CHECK_THROWS_AS(Connection::connect(fmt::format("127.0.0.1:{}", port), {},
                                            Deadline::after(1s)),
                        TimeoutError);
    }
    SECTION("a provider that is not here")
    {
        Options o;
        o.provider = "efa";
        try {
            (void)select(o);
            FAIL("selected an absent provider");
        } catch (const Error& e) {
            CHECK(e.code() == -FI_ENODATA);
            CHECK_THAT(e.what(), Catch::Contains("efa") && Catch::Contains("not usable"));
        }
    }
    SECTION("require_rdma without an RDMA device lists every provider and why")
    {
        if (!select().rdma()) {
            Options o;
            o.fallback = Fallback::require_rdma;
            try {
                (void)select(o);
                FAIL("require_rdma succeeded without RDMA");
            } catch (const Error& e) {
                CHECK_THAT(e.what(), Catch::Contains("verbs:") &&
                                         Catch::Contains("tcp: not RDMA") &&
                                         Catch::Contains("require_rdma"));
            }
        }
    }
    SECTION("a layered provider with the other endpoint kind")
    {
        Options o;
        o.provider = "tcp;ofi_rxm";
        o.kind = EndpointKind::msg;
        CHECK_THROWS_AS(select(o), UsageError);
    }
    SECTION("attributes that exclude a provider are named")
    {
        CHECK_THAT(explain_enodata(Options{{.domain = "no-such-nic"}}, "tcp", EndpointKind::msg),
                   Catch::Contains("no domain named 'no-such-nic'") && Catch::Contains("lo"));
        CHECK_THAT(explain_enodata(Options{{.node = "203.0.113.77"}}, "tcp", EndpointKind::msg),
                   Catch::Contains("cannot bind to address '203.0.113.77'"));
        CHECK_THAT(explain_enodata({}, "shm", EndpointKind::msg),
                   Catch::Contains("shm has no MSG endpoints"));
        Options pinned;
        pinned.provider = "tcp";
        pinned.domain = "no-such-nic";
        CHECK_THROWS_WITH(select(pinned), Catch::Contains("no domain named 'no-such-nic'"));
    }
}
