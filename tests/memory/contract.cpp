// SPDX-License-Identifier: MIT
// One memory contract on every provider: virtual addresses or offsets,
// provider or requested keys, local descriptors — each path exercised by
// turning mr_mode bits on where the provider accepts them.
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <set>

#include <rdma/fi_errno.h>

#include "support/cases.hpp"

using namespace weft;
using weft::test::soon;

namespace {


/// Writes, reads back and compares through `remote`; returns true when every byte matched.
bool round_trip(test::Pair& p, const RemoteRegion& remote, MemoryRegion& target, std::size_t n)
{
    auto src = p.client.allocate(n, Access::local);
    auto back = p.client.allocate(n, Access::local);
    test::fill_pattern(src->bytes(), n);
    int ctx = 0;
    p.client.write(src->all(), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    p.client.read(back->all(), remote, 0, &ctx);
    (void)p.client.endpoint().wait(&ctx, soon());
    return std::memcmp(back->data(), src->data(), n) == 0 &&
           std::memcmp(target.data(), src->data(), n) == 0;
}

} // namespace

TEST_CASE("memory contract: both addressing and key paths on each provider", "[matrix][memory]")
{
    const auto c = test::each_cell();
    const std::uint64_t forced =
        GENERATE(std::uint64_t{0}, std::uint64_t{FI_MR_VIRT_ADDR}, std::uint64_t{FI_MR_PROV_KEY},
                 std::uint64_t{FI_MR_LOCAL},
                 std::uint64_t{FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_LOCAL});
    Options o;
    o.force_mr_mode = forced;
    INFO(c.label() << " forced mr_mode " << mr_mode_string(forced));
    WEFT_REQUIRE_CELL(c, o);
    auto p = test::connect_pair(c, o);
    const std::uint64_t mode = p.server.domain()->mr_mode();
    CHECK((mode & forced) == forced);

    auto target = p.expose(8192, Access::remote_read_write);
    const RemoteRegion remote = RemoteRegion::decode(target->remote().encode());
    if (mode & FI_MR_VIRT_ADDR)
        CHECK(remote.base() == reinterpret_cast<std::uintptr_t>(target->data()));
    else
        CHECK(remote.base() == 0);
    CHECK(remote.key() == fi_mr_key(target->get()));
    if (mode & FI_MR_LOCAL)
        CHECK(target->desc() != nullptr);
    REQUIRE(round_trip(p, remote, *target, 8192));

    // The addressing rule matters: the other convention's address is rejected.
    const std::uint64_t wrong_base =
        (mode & FI_MR_VIRT_ADDR) ? 0 : reinterpret_cast<std::uintptr_t>(target->data());
    const RemoteRegion wrong(wrong_base, remote.length(), remote.key(), remote.flags());
    auto sink = p.client.allocate(64, Access::local);
    int ctx = 0;
    p.client.read(sink->all(), wrong, 0, &ctx);
    CHECK_THROWS_AS(p.client.endpoint().wait(&ctx, soon()), Error);
}

TEST_CASE("memory contract: requested keys are unique and unguessable", "[memory]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto domain = test::domain_for(c);
    REQUIRE_FALSE(domain->mr_mode() & FI_MR_PROV_KEY);
    std::vector<std::shared_ptr<MemoryRegion>> regions;
    std::set<std::uint64_t> keys;
    int high_bits = 0;
    for (int i = 0; i < 256; ++i) {
        regions.push_back(MemoryRegion::allocate(domain, 64, Access::remote_read));
        const std::uint64_t k = regions.back()->key();
        keys.insert(k);
        high_bits += std::popcount(k >> 32);
    }
    CHECK(keys.size() == 256);
    // Random 64-bit keys set about half of the 32 high bits (16 per key).
    CHECK(high_bits > 256 * 12);
    CHECK(high_bits < 256 * 20);
    // A released key can be drawn again later without clashing with live ones.
    regions.clear();
    for (int i = 0; i < 64; ++i)
        regions.push_back(MemoryRegion::allocate(domain, 64, Access::remote_read));
}

TEST_CASE("memory contract: access follows intent", "[memory][bad-input]")
{
    test::Case c{"tcp", EndpointKind::msg};
    WEFT_REQUIRE_CELL(c);
    auto p = test::connect_pair(c);
    auto local_only = p.expose(64, Access::local);
    CHECK_THROWS_WITH(local_only->remote(), Catch::Contains("Access::local"));
    CHECK_THROWS_AS(local_only->slice(60, 8), UsageError);

    auto read_only = p.expose(4096, Access::remote_read);
    std::memset(read_only->data(), 0x11, 4096);
    const RemoteRegion ro = read_only->remote();
    CHECK(ro.is_readable());
    CHECK_FALSE(ro.is_writable());
    auto src = p.client.allocate(4096, Access::local);
    std::memset(src->data(), 0x22, 4096);
    int ctx = 0;
    // Refused before posting...
    try {
        p.client.write(src->slice(0, 16), ro, 0, &ctx);
        FAIL("write to a read-only region was posted");
    } catch (const UsageError& e) {
        CHECK(e.code() == -FI_EACCES);
    }
    CHECK_FALSE(p.client.endpoint().poll_one().has_value());
    // ...and, with the descriptor forged writable, refused by the target's
    // provider: the registration itself grants no remote write.
    // tcp's write completion only means "sent": the target refuses the write
    // and drops the connection, which the next operation reports.
    const RemoteRegion forged(ro.base(), ro.length(), ro.key(),
                              RemoteRegion::readable | RemoteRegion::writable);
    bool reported = false;
    try {
        p.client.write(src->slice(0, 4096), forged, 0, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
        p.client.read(src->slice(0, 8), ro, 0, &ctx);
        (void)p.client.endpoint().wait(&ctx, soon());
    } catch (const TimeoutError& e) {
        FAIL("hung instead of reporting: " << e.what());
    } catch (const Error& e) {
        // Cancelled while pending, or posted after the drop (ENOTCONN, as
        // under AddressSanitizer's timing): either way the error says why.
        reported = true;
        CHECK((e.code() == -FI_ECANCELED || e.code() == -FI_ENOTCONN));
        CHECK_THAT(e.what(), Catch::Contains("refuses an RMA"));
    }
    CHECK(reported);
    CHECK(read_only->data()[0] == std::byte{0x11});
    CHECK(read_only->data()[4095] == std::byte{0x11});
}
