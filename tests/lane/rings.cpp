// SPDX-License-Identifier: MIT
// The lane's rings (src/lane/ring.hpp): every record arrives whole and in
// order across threads and processes, a sleeping receiver is woken and a
// polling one is not, and neither end trusts the other's words.
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "child.hpp"
#include "ring.hpp"
#include "support/thrown.hpp"
#include "unix_channel.hpp"

using namespace std::chrono_literals;
using weft::Deadline;
using weft::lane::RingLayout;
using weft::lane::RingReceiver;
using weft::lane::RingSender;

namespace {

weft::detail::Fd dup_fd(int fd) { return weft::detail::Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

RingSender sender_of(const RingReceiver& r)
{
    return RingSender::attach(dup_fd(r.segment().fd()), r.segment().size(), dup_fd(r.wake_fd()));
}

// Record i: a length that walks through every span, bytes derived from i.
std::size_t length_of(std::uint64_t i) { return (i * 37) % (RingLayout::max_payload + 1); }
std::byte byte_of(std::uint64_t i, std::size_t k)
{
    return static_cast<std::byte>((i * 131 + k * 7) & 0xff);
}

void push_all(RingSender& s, std::uint64_t count)
{
    std::vector<std::byte> buf(RingLayout::max_payload);
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::size_t n = length_of(i);
        for (std::size_t k = 0; k < n; ++k)
            buf[k] = byte_of(i, k);
        while (!s.push(static_cast<std::uint16_t>(i & 0xffff), std::span(buf).first(n)))
            std::this_thread::yield();
    }
}

// Pops `count` records, checking each; sleeps on the eventfd when the ring is
// empty. Returns how many times it slept.
std::uint64_t pop_all(RingReceiver& r, std::uint64_t count)
{
    std::vector<std::byte> buf(RingLayout::max_payload);
    std::uint64_t slept = 0;
    for (std::uint64_t i = 0; i < count;) {
        if (auto rec = r.pop(buf)) {
            REQUIRE(rec->kind == (i & 0xffff));
            REQUIRE(rec->length == length_of(i));
            for (std::size_t k = 0; k < rec->length; ++k)
                if (buf[k] != byte_of(i, k))
                    FAIL("record " << i << " byte " << k << " is wrong");
            ++i;
            continue;
        }
        if (r.arm()) {
            pollfd p{r.wake_fd(), POLLIN, 0};
            REQUIRE(::poll(&p, 1, 10000) == 1); // woken, never slept through
            ++slept;
        }
        r.disarm();
    }
    return slept;
}

} // namespace

TEST_CASE("lane ring: records of every length arrive whole and in order between threads",
          "[lane][ring]")
{
    const std::uint32_t slots = GENERATE(64u, 128u, 1024u);
    auto r = RingReceiver::create(slots);
    auto s = sender_of(r);
    constexpr std::uint64_t count = 200000;
    std::thread producer([&] { push_all(s, count); });
    const std::uint64_t slept = pop_all(r, count);
    producer.join();
    CHECK_FALSE(r.ready());
    INFO("the receiver slept " << slept << " times");
}

TEST_CASE("lane ring: a sending process and a receiver that sleeps between bursts",
          "[lane][ring]")
{
    auto r = RingReceiver::create(128);
    auto listener = weft::lane::UnixListener::open();
    constexpr std::uint64_t count = 1000000;
    auto child = weft::detail::Child::fork([name = listener.name()](int) {
        auto ch = weft::lane::UnixChannel::connect(name, Deadline::after(10s));
        auto m = ch.receive(64, 2, Deadline::after(10s));
        if (!m || m->fds.size() != 2)
            return 2;
        std::uint64_t size = 0;
        std::memcpy(&size, m->bytes.data(), 8);
        auto s = RingSender::attach(std::move(m->fds[0]), size, std::move(m->fds[1]));
        push_all(s, count / 2);
        ::usleep(200000); // the receiver goes to sleep here
        push_all(s, count / 2);
        return 0;
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    const std::uint64_t size = r.segment().size();
    const int fds[] = {r.segment().fd(), r.wake_fd()};
    ch->send(std::as_bytes(std::span(&size, 1)), fds, Deadline::after(10s));
    // Both halves: records i and i + count/2 are equal by construction only
    // when count/2 is a multiple of the pattern's period; check each half.
    std::vector<std::byte> buf(RingLayout::max_payload);
    struct rusage before {}, after {};
    std::uint64_t slept = 0;
    for (int half = 0; half < 2; ++half) {
        for (std::uint64_t i = 0; i < count / 2;) {
            if (auto rec = r.pop(buf)) {
                REQUIRE(rec->length == length_of(i));
                REQUIRE((rec->length == 0 || buf[rec->length - 1] == byte_of(i, rec->length - 1)));
                ++i;
                continue;
            }
            if (r.arm()) {
                ::getrusage(RUSAGE_THREAD, &before);
                pollfd p{r.wake_fd(), POLLIN, 0};
                REQUIRE(::poll(&p, 1, 10000) == 1);
                ::getrusage(RUSAGE_THREAD, &after);
                ++slept;
            }
            r.disarm();
        }
    }
    CHECK(child.finish(Deadline::after(30s)) == 0);
    CHECK(slept >= 1); // the pause in the middle was slept through on the eventfd
    // Asleep costs no CPU: the last sleep's user+system time is tiny.
    const auto us = [](const rusage& u) {
        return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000 + u.ru_utime.tv_usec +
               u.ru_stime.tv_usec;
    };
    CHECK(us(after) - us(before) < 20000);
}

TEST_CASE("lane ring: a polling receiver costs the sender no wake-up", "[lane][ring]")
{
    auto r = RingReceiver::create(64);
    auto s = sender_of(r);
    const std::byte b[8] = {};
    REQUIRE(s.push(1, b));
    pollfd p{r.wake_fd(), POLLIN, 0};
    CHECK(::poll(&p, 1, 0) == 0); // not armed: no eventfd write
    std::byte out[8];
    REQUIRE(r.pop(out));
    CHECK_FALSE(r.arm() == false); // empty: armed and may sleep
    REQUIRE(s.push(2, b));
    CHECK(::poll(&p, 1, 0) == 1); // armed: woken
    CHECK_FALSE(r.arm());         // and arm() says a record waits
    r.disarm();
    CHECK(::poll(&p, 1, 0) == 0); // drained
    REQUIRE(r.pop(out));
    CHECK(r.pop(out) == std::nullopt);
}

TEST_CASE("lane ring: a full ring refuses a record until the receiver consumes", "[lane][ring]")
{
    auto r = RingReceiver::create(4);
    auto s = sender_of(r);
    std::vector<std::byte> big(RingLayout::first_payload + 2 * RingLayout::line); // 3 slots
    CHECK(s.push(1, big));
    CHECK(s.room() == 1);
    CHECK_FALSE(s.push(2, big)); // 3 slots, 1 free
    std::byte small[4] = {};
    CHECK(s.push(3, small));
    CHECK_FALSE(s.push(4, small));
    std::vector<std::byte> out(RingLayout::max_payload);
    CHECK(r.pop(out)->kind == 1);
    CHECK(s.push(2, big)); // wraps round the end
    CHECK(r.pop(out)->kind == 3);
    auto last = r.pop(out);
    REQUIRE(last);
    CHECK(last->kind == 2);
    CHECK(last->length == big.size());
    using weft::test::thrown;
    std::vector<std::byte> too_big(RingLayout::max_payload + 1);
    CHECK_THAT(thrown<weft::UsageError>([&] { s.push(5, too_big); }), Catch::Contains("at most"));
    std::vector<std::byte> needs_five(RingLayout::first_payload + 4 * RingLayout::line);
    CHECK_THAT(thrown<weft::UsageError>([&] { s.push(5, needs_five); }),
               Catch::Contains("more than the ring's 4 slots"));
}

TEST_CASE("lane ring: a record's old payload never passes for a ready record a lap later",
          "[lane][ring]")
{
    auto r = RingReceiver::create(4);
    auto s = sender_of(r);
    // A 3-slot record at indices 0..2 whose second slot starts with the word
    // 6: the seq a record at index 5 (the same slot, a lap on) would carry.
    std::vector<std::byte> a(RingLayout::first_payload + 2 * RingLayout::line);
    const std::uint64_t six = 6;
    std::memcpy(a.data() + RingLayout::first_payload, &six, 8);
    std::vector<std::byte> out(RingLayout::max_payload);
    const std::byte small[1] = {};
    REQUIRE(s.push(1, a));
    REQUIRE(r.pop(out)->kind == 1); // head 3
    REQUIRE(s.push(2, small));
    REQUIRE(r.pop(out)->kind == 2); // head 4
    REQUIRE(s.push(3, small));
    REQUIRE(r.pop(out)->kind == 3); // head 5: slot 1 holds the old payload
    CHECK_FALSE(r.ready());
    CHECK(r.pop(out) == std::nullopt);
}

TEST_CASE("lane ring: a hostile sender's garbage is refused, never read past the ring",
          "[lane][ring][faults]")
{
    std::mt19937_64 rng(37);
    int refused = 0, empty = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        auto r = RingReceiver::create(8);
        // The sender's mapping: scribble over everything it may write.
        auto view = weft::lane::Segment::map(dup_fd(r.segment().fd()),
                                             weft::lane::PeerAccess::read_write,
                                             r.segment().size());
        for (std::size_t k = 0; k < view.size(); k += 8) {
            std::uint64_t v = rng();
            if (k >= RingLayout::header && (rng() & 1)) // often a plausible "ready" seq
                v = (rng() & 3) + 1;
            std::memcpy(view.data() + k, &v, 8);
        }
        std::vector<std::byte> out(64 + (rng() % 2) * RingLayout::max_payload);
        try {
            for (int k = 0; k < 16; ++k)
                if (!r.pop(out))
                    break;
            ++empty;
        } catch (const weft::Error& e) {
            ++refused;
            const std::string what = e.what();
            CHECK((what.find("out of protocol") != std::string::npos ||
                   what.find("buffer") != std::string::npos));
        }
    }
    CHECK(refused > 0);
    CHECK(empty > 0);

    // A hostile receiver: a head ahead of what was written.
    auto r = RingReceiver::create(8);
    auto s = sender_of(r);
    std::uint64_t bogus = 1000;
    std::memcpy(r.segment().data() + RingLayout::line, &bogus, 8);
    using weft::test::thrown;
    CHECK_THAT(thrown<weft::Error>([&] { s.push(1, std::span<const std::byte>()); }),
               Catch::Contains("impossible"));
}

TEST_CASE("lane ring: a sender checks what it attaches to", "[lane][ring]")
{
    auto r = RingReceiver::create(8);
    auto seg = weft::lane::Segment::create(RingLayout::bytes(8), "not-a-ring");
    seg.seal(weft::lane::PeerAccess::read_write);
    using weft::test::thrown;
    CHECK_THAT(thrown<weft::UsageError>([&] {
                   RingSender::attach(dup_fd(seg.fd()), seg.size(), dup_fd(r.wake_fd()));
               }),
               Catch::Contains("not a weft ring"));
    CHECK_THAT(thrown<weft::UsageError>([] { RingReceiver::create(6); }),
               Catch::Contains("power of two"));
}
