// SPDX-License-Identifier: MIT
// Setups weft cannot use: nobody at the server address, an absent provider, an
// impossible policy, attributes that exclude a provider. Each gives its
// specific error; no crash, no hang.
#include <catch2/catch.hpp>

#include <cstdint>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/sockets.hpp"

using namespace weft;
using namespace std::chrono_literals;

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
