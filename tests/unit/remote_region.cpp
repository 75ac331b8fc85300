// SPDX-License-Identifier: MIT
// RemoteRegion's bounds and access checks, made before any traffic, without
// any fabric.
#include <catch2/catch.hpp>

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"
#include "weft/fabric/remote_region.hpp"

using namespace weft;

TEST_CASE("RemoteRegion checks bounds and access before any traffic", "[unit][bounds][bad-input]")
{
    const RemoteRegion rw(1000, 64, 9, RemoteRegion::readable | RemoteRegion::writable);
    CHECK(rw.write_address(0, 64) == 1000);
    CHECK(rw.read_address(63, 1) == 1063);
    CHECK(rw.write_address(64, 0) == 1064);
    CHECK_THROWS_AS(rw.write_address(1, 64), UsageError);
    CHECK_THROWS_AS(rw.read_address(65, 0), UsageError);
    CHECK_THROWS_AS(rw.write_address(~0ull, 2), UsageError); // offset + len wraps
    try {
        (void)rw.write_address(60, 8);
        FAIL("out-of-bounds write accepted");
    } catch (const UsageError& e) {
        CHECK(e.code() == -FI_EINVAL);
        CHECK_THAT(e.what(), Catch::Contains("out of bounds") && Catch::Contains("64 B region"));
    }

    const RemoteRegion ro(0, 64, 9, RemoteRegion::readable);
    CHECK(ro.read_address(0, 64) == 0);
    try {
        (void)ro.write_address(0, 1);
        FAIL("write to a read-only region accepted");
    } catch (const UsageError& e) {
        CHECK(e.code() == -FI_EACCES);
        CHECK_THAT(e.what(), Catch::Contains("remote-write access"));
    }

    CHECK_THROWS_AS(RemoteRegion(0, 64, 9, RemoteRegion::writable).read_address(0, 1), UsageError);
    CHECK_THROWS_AS(rw.atomic_address(4), UsageError); // unaligned
    CHECK(RemoteRegion(8, 64, 1, RemoteRegion::readable | RemoteRegion::writable).atomic_address(8) == 16);
}
