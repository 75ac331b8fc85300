// SPDX-License-Identifier: MIT
// weft's wire formats (its one codec, RemoteRegion, NodeAddress) and the
// defects decoding names, without any fabric.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"
#include "weft/peers/node_address.hpp"
#include "weft/fabric/remote_region.hpp"
#include "wire.hpp"

using namespace weft;

namespace {

const RemoteRegion sample(0x1122334455667788ull, 4096, 0xa1b2c3d4e5f60718ull,
                          RemoteRegion::readable | RemoteRegion::writable | RemoteRegion::virt_addr);

std::string decode_error(RemoteRegion::Wire w)
{
    try {
        (void)RemoteRegion::decode(w);
    } catch (const UsageError& e) {
        CHECK(e.code() == -FI_EINVAL);
        return e.what();
    }
    return "(no error)";
}

void reseal(RemoteRegion::Wire& w)
{
    const std::uint32_t crc = crc32c(std::span(w).first(32));
    for (int i = 0; i < 4; ++i)
        w[32 + static_cast<std::size_t>(i)] = static_cast<std::byte>(crc >> (8 * i));
}

/// The error decoding `sample` with byte `at` set to `value`: its checksum made
/// right again (a forged descriptor), or left as it is (corruption).
std::string defect_error(std::size_t at, std::byte value, bool resealed)
{
    auto w = sample.encode();
    w[at] = value;
    if (resealed)
        reseal(w);
    return decode_error(w);
}

} // namespace

TEST_CASE("RemoteRegion round-trips through its wire format", "[unit][wire]")
{
    const auto w = sample.encode();
    CHECK(RemoteRegion::decode(w) == sample);
}

TEST_CASE("RemoteRegion wire layout is fixed and little-endian", "[unit][wire]")
{
    const auto w = sample.encode();
    REQUIRE(w.size() == 40);
    CHECK(std::memcmp(w.data(), "WFRR", 4) == 0);
    CHECK(w[4] == std::byte{1});
    CHECK(w[5] == std::byte{0x07});
    CHECK(w[8] == std::byte{0x88}); // base, least significant byte first
    CHECK(w[15] == std::byte{0x11});
    CHECK(w[16] == std::byte{0x00}); // length 4096 = 0x1000
    CHECK(w[17] == std::byte{0x10});
    CHECK(w[24] == std::byte{0x18}); // key
    CHECK(w[31] == std::byte{0xa1});
    // The CRC-32C check value of "123456789" is 0xE3069283.
    const char* check = "123456789";
    CHECK(crc32c(std::as_bytes(std::span(check, 9))) == 0xE3069283u);
}

TEST_CASE("RemoteRegion::decode names each defect", "[unit][wire][bad-input]")
{
    SECTION("wrong size")
    {
        std::array<std::byte, 12> short_buf{};
        try {
            (void)RemoteRegion::decode(short_buf);
            FAIL("decoded 12 bytes");
        } catch (const UsageError& e) {
            CHECK_THAT(e.what(), Catch::Contains("12 bytes, expected 40"));
        }
    }
    SECTION("bad magic")
    {
        CHECK_THAT(defect_error(0, std::byte{'X'}, false), Catch::Contains("bad magic"));
    }
    SECTION("newer version")
    {
        CHECK_THAT(defect_error(4, std::byte{2}, true), Catch::Contains("wire version 2"));
    }
    SECTION("unknown flags")
    {
        CHECK_THAT(defect_error(5, std::byte{0x80}, true), Catch::Contains("unknown flag bits"));
    }
    SECTION("reserved bytes")
    {
        CHECK_THAT(defect_error(6, std::byte{1}, true), Catch::Contains("reserved"));
    }
    SECTION("corruption")
    {
        CHECK_THAT(defect_error(20, sample.encode()[20] ^ std::byte{0x40}, false),
                   Catch::Contains("checksum mismatch"));
    }
    SECTION("zero length")
    {
        auto w = RemoteRegion(0, 1, 5, RemoteRegion::readable).encode();
        std::memset(&w[16], 0, 8);
        reseal(w);
        CHECK_THAT(decode_error(w), Catch::Contains("zero length"));
    }
    SECTION("the empty descriptor is a value: no region, refused at every access")
    {
        const auto w = RemoteRegion{}.encode();
        const RemoteRegion none = RemoteRegion::decode(w);
        CHECK(none == RemoteRegion{});
        CHECK(none.empty());
        CHECK_THROWS_WITH(none.write_address(0, 1), Catch::Contains("empty RemoteRegion"));
        CHECK_THROWS_WITH(none.read_address(0, 0), Catch::Contains("empty RemoteRegion"));
    }
    SECTION("overflowing range")
    {
        auto w = RemoteRegion(~0ull - 10, 100, 5, RemoteRegion::readable).encode();
        CHECK_THAT(decode_error(w), Catch::Contains("overflows"));
    }
    SECTION("garbage")
    {
        RemoteRegion::Wire w;
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = static_cast<std::byte>(i * 37 + 11);
        CHECK_THAT(decode_error(w), Catch::Contains("bad magic"));
    }
}

TEST_CASE("wire: a Node address round-trips, and each defect is named", "[unit][wire][node]")
{
    std::vector<std::byte> fabric(16);
    for (std::size_t i = 0; i < fabric.size(); ++i)
        fabric[i] = static_cast<std::byte>(i * 7 + 1);
    const NodeAddress a(EndpointKind::rdm, "tcp;ofi_rxm", 1, 0x1122334455667788ull, fabric);
    const auto bytes = a.encode();
    CHECK(bytes.size() == 28 + a.provider().size() + fabric.size() + 4);
    CHECK(NodeAddress::decode(bytes) == a);

    const auto rejected = [&](std::vector<std::byte> b) {
        try {
            (void)NodeAddress::decode(b);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    auto flipped = bytes;
    flipped[30] ^= std::byte{1}; // inside the provider name
    CHECK_THAT(rejected(flipped), Catch::Contains("checksum"));
    CHECK_THAT(rejected({bytes.begin(), bytes.end() - 1}), Catch::Contains("checksum"));
    CHECK_THAT(rejected({bytes.begin(), bytes.begin() + 10}), Catch::Contains("shorter"));
    auto wrong_magic = bytes;
    wrong_magic[0] = std::byte{'X'};
    CHECK_THAT(rejected(wrong_magic), Catch::Contains("magic"));
    // A forged address with a valid checksum: version, kind, lengths.
    const auto forged = [&](std::size_t at, std::byte v) {
        auto b = bytes;
        b.resize(b.size() - 4);
        b[at] = v;
        const std::uint32_t crc = crc32c(b);
        for (int i = 0; i < 4; ++i)
            b.push_back(static_cast<std::byte>(crc >> (8 * i)));
        return b;
    };
    CHECK_THAT(rejected(forged(4, std::byte{9})), Catch::Contains("version 9"));
    CHECK_THAT(rejected(forged(5, std::byte{7})), Catch::Contains("endpoint kind 7"));
    CHECK_THAT(rejected(forged(6, std::byte{1})), Catch::Contains("reserved"));
    CHECK_THAT(rejected(forged(21, std::byte{0x40})), Catch::Contains("do not add up"));
    CHECK_THAT(rejected(forged(24, std::byte{' '})), Catch::Contains("printable"));

    CHECK_THROWS_AS(NodeAddress(EndpointKind::msg, "", 1, 0, fabric), UsageError);
    CHECK_THROWS_AS(NodeAddress(EndpointKind::msg, "tcp", 1, 0, {}), UsageError);
    CHECK_THROWS_AS(NodeAddress(EndpointKind::msg, "tcp", 1, 0, std::vector<std::byte>(2000)),
                    UsageError);
}

TEST_CASE("wire: a Node address with its same-host lane round-trips as version 2, and a "
          "version-1 address stays version 1",
          "[unit][wire][node][lane]")
{
    const std::vector<std::byte> fabric(16, std::byte{3});
    NodeAddress::SameHost h;
    for (std::size_t i = 0; i < h.boot_id.size(); ++i)
        h.boot_id[i] = static_cast<std::byte>(i + 1);
    h.net_ns = 4026531840;
    h.pid_ns = 4026531836;
    h.pid = 4242;
    h.uid = 1000;
    h.lane = "weft-lane-00112233445566778899aabbccddeeff";
    const NodeAddress a(EndpointKind::rdm, "shm", 1, 7, fabric, h);
    const auto bytes = a.encode();
    CHECK(bytes[4] == std::byte{2});
    CHECK(bytes.size() == 28 + 3 + fabric.size() + 16 + 8 + 8 + 4 + 4 + 4 + h.lane.size() + 4);
    const NodeAddress back = NodeAddress::decode(bytes);
    CHECK(back == a);
    REQUIRE(back.same_host());
    CHECK(back.same_host()->lane == h.lane);
    CHECK(back.same_host()->pid == 4242);

    const NodeAddress plain(EndpointKind::rdm, "shm", 1, 7, fabric);
    auto v1 = plain.encode();
    CHECK(v1[4] == std::byte{1});
    CHECK_FALSE(NodeAddress::decode(v1).same_host());
    // A version-1 body claiming version 2 lacks the same-host part.
    v1.resize(v1.size() - 4);
    v1[4] = std::byte{2};
    const std::uint32_t crc = crc32c(v1);
    for (int i = 0; i < 4; ++i)
        v1.push_back(static_cast<std::byte>(crc >> (8 * i)));
    try {
        (void)NodeAddress::decode(v1);
        FAIL("accepted");
    } catch (const UsageError& e) {
        CHECK_THAT(e.what(), Catch::Contains("do not add up"));
    }
    h.lane = "bad name";
    CHECK_THROWS_AS(NodeAddress(EndpointKind::rdm, "shm", 1, 7, fabric, h), UsageError);
}

TEST_CASE("wire: the one codec writes little-endian in place or appended, and a short or "
          "long message is an error naming its call and what it was",
          "[unit][wire]")
{
    const std::array<std::byte, 4> magic = {std::byte{'T'}, std::byte{'E'}, std::byte{'S'},
                                            std::byte{'T'}};
    wire::Writer w;
    w.raw(magic);
    w.u8(0x01);
    w.u16(0x0302);
    w.u32(0x07060504);
    w.u64(0x0f0e0d0c0b0a0908ull);
    w.i64(-2);
    w.str("ab");
    w.raw("cd");
    const std::vector<std::byte>& bytes = w.data();
    REQUIRE(bytes.size() == 4 + 1 + 2 + 4 + 8 + 8 + 4 + 2 + 2);
    // Every integer's low byte first: 0x01, 0x02 .. 0x0f in order after the magic.
    for (int i = 0; i < 15; ++i)
        CHECK(std::to_integer<int>(bytes[4 + static_cast<std::size_t>(i)]) == i + 1);
    CHECK(std::to_integer<int>(bytes[19]) == 0xfe); // -2: two's complement
    CHECK(std::to_integer<int>(bytes[26]) == 0xff);

    // The same fields placed into a buffer of their size: the same bytes.
    std::vector<std::byte> placed(4 + 1 + 2 + 4 + 8);
    wire::Placer p(placed);
    p.raw(magic).u8(0x01).u16(0x0302).u32(0x07060504).u64(0x0f0e0d0c0b0a0908ull);
    CHECK(p.size() == placed.size());
    CHECK(std::equal(placed.begin(), placed.end(), bytes.begin()));

    wire::Reader r(bytes, "test message", "a test");
    CHECK(std::ranges::equal(r.raw(4), magic));
    CHECK(r.u8() == 0x01);
    CHECK(r.u16() == 0x0302);
    CHECK(r.u32() == 0x07060504);
    CHECK(r.u64() == 0x0f0e0d0c0b0a0908ull);
    CHECK(r.i64() == -2);
    CHECK(r.str() == "ab");
    CHECK(r.rest().size() == 2);
    CHECK_NOTHROW(r.finish());

    // Truncated: a length that runs past the end.
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + 30);
    wire::Reader short_one(cut, "test message", "a test");
    (void)short_one.raw(27);
    try {
        (void)short_one.str();
        FAIL("a read past the end returned");
    } catch (const Error& e) {
        CHECK(e.call() == "a test");
        CHECK(e.code() == -EPROTO);
        CHECK_THAT(e.what(), Catch::Contains("test message") && Catch::Contains("truncated"));
    }
    // Trailing bytes: garbage too.
    wire::Reader long_one(bytes, "test message", "a test");
    (void)long_one.raw(10);
    try {
        long_one.finish();
        FAIL("trailing bytes were taken");
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("trailing bytes"));
    }
}
