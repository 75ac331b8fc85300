// SPDX-License-Identifier: MIT
// Two co-located ends joined by the lane (src/lane/pair.hpp): writes and
// reads checked against what the owner offered, through a sealed mapping or
// process_vm_*, notifications and messages through the rings, withdrawal,
// and a dead peer seen at once.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <vector>

#include <catch2/catch.hpp>

#include "child.hpp"
#include "pair.hpp"
#include "support/thrown.hpp"

using namespace std::chrono_literals;
using weft::Deadline;
using weft::lane::Offer;
using weft::lane::Pair;
using weft::lane::PeerAccess;
using weft::lane::RecordKind;
using weft::lane::Segment;
using weft::lane::UnixChannel;
using weft::lane::UnixListener;
using weft::test::thrown;

namespace {

std::pair<Pair, Pair> joined(pid_t expected = 0, std::uint32_t slots = 64)
{
    UnixListener listener = UnixListener::open();
    auto connecting = std::async(std::launch::async, [&] {
        return Pair::open(UnixChannel::connect(listener.name(), Deadline::after(10s)), 1, expected,
                          slots, Deadline::after(10s));
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    Pair accepted = Pair::open(std::move(*ch), 2, 0, slots, Deadline::after(10s));
    return {connecting.get(), std::move(accepted)};
}

Offer offer_of(const void* p, std::size_t len, std::uint64_t key, bool writable)
{
    return Offer{key, reinterpret_cast<std::uintptr_t>(p), len, true, writable};
}

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s)); }

} // namespace

TEST_CASE("lane pair: writes and reads reach exactly what the owner offered", "[lane][pair]")
{
    auto [a, b] = joined(::getpid());
    CHECK(a.peer_instance() == 2);
    CHECK(b.peer_instance() == 1);
    CHECK(b.peer().pid == ::getpid());

    // b owns: a writable segment, a read-only one, and plain heap memory.
    Segment rw = Segment::create(4096, "rw");
    rw.seal(PeerAccess::read_write);
    Segment ro = Segment::create(4096, "ro");
    std::memcpy(ro.data(), "read me", 7);
    ro.seal(PeerAccess::read);
    std::vector<std::byte> heap(1000);
    b.offer(offer_of(rw.data() + 64, 512, 0x10, true), &rw, Deadline::after(5s));
    b.offer(offer_of(ro.data(), 4096, 0x20, false), &ro, Deadline::after(5s));
    b.offer(offer_of(heap.data(), heap.size(), 0x30, true), nullptr, Deadline::after(5s));

    a.write({0x10, 8}, bytes("through the mapping"));
    CHECK(std::memcmp(rw.data() + 64 + 8, "through the mapping", 19) == 0);
    a.write({0x30, 990}, bytes("by process"));
    CHECK(std::memcmp(heap.data() + 990, "by process", 10) == 0);
    std::array<std::byte, 7> got{};
    a.read({0x20, 0}, got);
    CHECK(std::memcmp(got.data(), "read me", 7) == 0);
    a.read({0x30, 990}, got);
    CHECK(std::memcmp(got.data(), "by proc", 7) == 0);

    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x20, 0}, bytes("no")); }),
               Catch::Contains("read-only"));
    CHECK(std::memcmp(ro.data(), "read me", 7) == 0);
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x10, 510}, bytes("abc")); }),
               Catch::Contains("[510, +3)"));
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x30, 998}, bytes("abc")); }),
               Catch::Contains("1000 B region"));
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x99, 0}, bytes("abc")); }),
               Catch::Contains("offers no such region"));
    CHECK(a.knows(0x10));
    CHECK_FALSE(a.knows(0x99));

    // Addressed as a RemoteRegion under FI_MR_VIRT_ADDR: the owner's addresses.
    const auto va = reinterpret_cast<std::uintptr_t>(rw.data() + 64);
    a.write({0x10, va + 100, true}, bytes("virtual"));
    CHECK(std::memcmp(rw.data() + 164, "virtual", 7) == 0);
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x10, va - 1, true}, bytes("x")); }),
               Catch::Contains("region"));
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x10, va + 510, true}, bytes("xyz")); }),
               Catch::Contains("[510, +3)"));
}

TEST_CASE("lane pair: a message longer than a record arrives whole, all or nothing",
          "[lane][pair]")
{
    auto [a, b] = joined(0, 1024);
    std::vector<std::byte> big(3 * weft::lane::RingLayout::max_payload + 77);
    for (std::size_t i = 0; i < big.size(); ++i)
        big[i] = static_cast<std::byte>(i * 13);
    std::vector<std::byte> out(16384);
    REQUIRE(a.send(big));
    REQUIRE(a.notify(5));
    auto rec = b.receive(out);
    REQUIRE(rec);
    CHECK(rec->kind == static_cast<std::uint16_t>(RecordKind::message));
    REQUIRE(rec->length == big.size());
    CHECK(std::memcmp(out.data(), big.data(), big.size()) == 0);
    rec = b.receive(out);
    REQUIRE(rec);
    CHECK(rec->kind == static_cast<std::uint16_t>(RecordKind::notify));
    // A ring of 1024 slots (64 KiB) can never hold 70 kB: refused, saying so.
    std::vector<std::byte> huge(70000);
    CHECK_THROWS_WITH(a.send(huge), Catch::Contains("never fits"));
    // 30000 B take 471 slots: two fit, a third finds no room and sends nothing.
    std::vector<std::byte> part(30000, std::byte{7});
    REQUIRE(a.send(part));
    REQUIRE(a.send(part));
    CHECK_FALSE(a.send(part));
    std::vector<std::byte> wide(40000);
    for (int k = 0; k < 2; ++k) {
        const auto got = b.receive(wide);
        REQUIRE(got);
        CHECK(got->length == part.size());
        CHECK(wide[part.size() - 1] == std::byte{7});
    }
    CHECK_FALSE(b.receive(wide));
    // Longer than the receiver's buffer: an error, not an overflow.
    REQUIRE(a.send(std::span(big).first(5000)));
    std::vector<std::byte> small(4096);
    CHECK_THAT(thrown<weft::Error>([&] { b.receive(small); }), Catch::Contains("5000 B message"));
}

TEST_CASE("lane pair: notifications and messages arrive in order, each once", "[lane][pair]")
{
    auto [a, b] = joined();
    std::vector<std::byte> out(weft::lane::RingLayout::max_payload);
    constexpr std::uint32_t count = 100000;
    auto sender = std::async(std::launch::async, [&a = a] {
        for (std::uint32_t i = 0; i < count; ++i) {
            const bool ok = i % 3 == 0 ? a.send(bytes(std::to_string(i))) : a.notify(i);
            if (!ok) {
                --i; // full: try the same one again
                std::this_thread::yield();
            }
        }
    });
    for (std::uint32_t i = 0; i < count;) {
        auto rec = b.receive(out);
        if (!rec)
            continue;
        if (i % 3 == 0) {
            REQUIRE(rec->kind == static_cast<std::uint16_t>(RecordKind::message));
            REQUIRE(std::string(reinterpret_cast<const char*>(out.data()), rec->length) ==
                    std::to_string(i));
        } else {
            REQUIRE(rec->kind == static_cast<std::uint16_t>(RecordKind::notify));
            std::uint32_t v = 0;
            std::memcpy(&v, out.data(), 4);
            REQUIRE(v == i);
        }
        ++i;
    }
    sender.get();
    CHECK_FALSE(b.receive(out));
}

TEST_CASE("lane pair: a withdrawn, detached region is out of reach", "[lane][pair][revoke]")
{
    auto [a, b] = joined();
    Segment rw = Segment::create(4096, "rw");
    rw.seal(PeerAccess::read_write);
    b.offer(offer_of(rw.data(), 4096, 0x10, true), &rw, Deadline::after(5s));
    a.write({0x10, 0}, bytes("first"));
    b.withdraw(0x10, Deadline::after(5s));
    rw.detach_peers();
    CHECK_THAT(thrown<weft::UsageError>([&] { a.write({0x10, 0}, bytes("again")); }),
               Catch::Contains("never registered, or revoked"));
    CHECK(std::memcmp(rw.data(), "first", 5) == 0);
}

TEST_CASE("lane pair: a peer that dies is seen by its channel, and its memory is gone",
          "[lane][pair][faults]")
{
    UnixListener listener = UnixListener::open();
    auto owner = weft::detail::Child::fork([name = listener.name()](int to_parent) {
        auto p = Pair::open(UnixChannel::connect(name, Deadline::after(10s)), 7, 0, 64,
                            Deadline::after(10s));
        static std::vector<std::byte> heap(4096);
        p.offer(offer_of(heap.data(), heap.size(), 0x30, true), nullptr, Deadline::after(5s));
        const char ready = 'r';
        if (::write(to_parent, &ready, 1) != 1)
            return 2;
        ::pause();
        return 0;
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    Pair p = Pair::open(std::move(*ch), 8, owner.pid(), 64, Deadline::after(10s));
    REQUIRE(owner.read_until('r', Deadline::after(10s)) == "r");
    p.write({0x30, 0}, bytes("alive")); // process_vm_writev into the owner
    owner.kill_now();
    try {
        p.write({0x30, 0}, bytes("dead?"));
        FAIL("wrote into a dead process");
    } catch (const weft::Error& e) {
        CHECK(e.peer_lost());
    }
    try {
        p.tend();
        FAIL("the channel of a dead peer still open");
    } catch (const weft::Error& e) {
        CHECK(e.peer_lost());
    }
}

TEST_CASE("lane pair: a peer that is not the process its address named is refused",
          "[lane][pair]")
{
    UnixListener listener = UnixListener::open();
    auto other = std::async(std::launch::async, [&] {
        try {
            Pair::open(UnixChannel::connect(listener.name(), Deadline::after(10s)), 1, 0, 64,
                       Deadline::after(2s));
        } catch (const weft::Error&) {
        }
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    CHECK_THAT(thrown<weft::Error>([&] {
                   Pair::open(std::move(*ch), 2, ::getpid() + 1, 64, Deadline::after(5s));
               }),
               Catch::Contains("not the process that published the address"));
    other.get();
}
