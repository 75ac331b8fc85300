// SPDX-License-Identifier: MIT
// The lane's channel (src/lane/unix_channel.hpp): whole messages with
// descriptors, the peer named as the kernel saw it connect, and a peer's end
// seen at once whether it closed or was killed.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "child.hpp"
#include "support/open_fds.hpp"
#include "support/thrown.hpp"
#include "unix_channel.hpp"

using namespace std::chrono_literals;
using weft::Deadline;
using weft::lane::UnixChannel;
using weft::lane::UnixListener;

namespace {

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s)); }

} // namespace

TEST_CASE("lane channel: messages carry descriptors, and name the peer process",
          "[lane][channel]")
{
    UnixListener listener = UnixListener::open();
    CHECK(listener.name().rfind("weft-lane-", 0) == 0);
    CHECK(listener.name().size() == 10 + 32);
    auto child = weft::detail::Child::fork([name = listener.name()](int) {
        UnixChannel ch = UnixChannel::connect(name, Deadline::after(10s));
        auto m = ch.receive(100, 2, Deadline::after(10s));
        if (!m || m->fds.size() != 2)
            return 2;
        // Both descriptors work here: answer through the pipe it was given.
        const std::string text(reinterpret_cast<const char*>(m->bytes.data()), m->bytes.size());
        const std::string reply = "got " + text;
        if (::write(m->fds[1].get(), reply.data(), reply.size()) != static_cast<ssize_t>(reply.size()))
            return 3;
        struct stat st {};
        return ::fstat(m->fds[0].get(), &st) == 0 && S_ISREG(st.st_mode) ? 0 : 4;
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    const auto who = ch->peer();
    CHECK(who.pid == child.pid());
    CHECK(who.uid == ::geteuid());

    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    weft::detail::Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    weft::detail::Fd file(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
    const int fds[] = {file.get(), write_end.get()};
    ch->send(bytes("hello"), fds, Deadline::after(10s));
    write_end.reset();
    CHECK(child.finish(Deadline::after(10s)) == 0);
    char buf[32] = {};
    CHECK(::read(read_end.get(), buf, sizeof buf) == 9);
    CHECK(std::string(buf) == "got hello");
}

TEST_CASE("lane channel: a killed peer is an error at once, not a wait to the deadline",
          "[lane][channel][faults]")
{
    UnixListener listener = UnixListener::open();
    auto child = weft::detail::Child::fork([name = listener.name()](int) {
        UnixChannel ch = UnixChannel::connect(name, Deadline::after(10s));
        ::pause();
        return 0;
    });
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    child.kill_now();
    const auto start = std::chrono::steady_clock::now();
    try {
        ch->receive(100, 0, Deadline::after(30s));
        FAIL("a message from a dead peer");
    } catch (const weft::Error& e) {
        CHECK(e.peer_lost());
        CHECK_THAT(e.what(), Catch::Contains("closed its end"));
    }
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    try {
        ch->send(bytes("anyone?"), {}, Deadline::after(30s));
        FAIL("a message to a dead peer");
    } catch (const weft::Error& e) {
        CHECK(e.peer_lost());
    }
    // Its end polls as hung up: what an event loop sees.
    pollfd p{ch->fd(), POLLIN, 0};
    CHECK(::poll(&p, 1, 0) == 1);
    CHECK((p.revents & (POLLHUP | POLLIN)) != 0);
}

TEST_CASE("lane channel: oversized messages and surplus descriptors are refused, and none leaks",
          "[lane][channel]")
{
    UnixListener listener = UnixListener::open();
    UnixChannel a = UnixChannel::connect(listener.name(), Deadline::after(10s));
    auto b = listener.accept(Deadline::after(10s));
    REQUIRE(b);
    const int before = weft::test::open_fds();
    weft::detail::Fd f1(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    weft::detail::Fd f2(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    const int two[] = {f1.get(), f2.get()};
    a.send(bytes("two descriptors"), two, Deadline::after(10s));
    using weft::test::thrown;
    CHECK_THAT(thrown<weft::Error>([&] { b->receive(100, 1, Deadline::after(10s)); }),
               Catch::Contains("larger than expected"));
    a.send(bytes("a message longer than ten bytes"), {}, Deadline::after(10s));
    CHECK_THAT(thrown<weft::Error>([&] { b->receive(10, 0, Deadline::after(10s)); }),
               Catch::Contains("larger than expected"));
    f1.reset();
    f2.reset();
    CHECK(weft::test::open_fds() == before); // the two that arrived were closed with the refusal
    CHECK_FALSE(b->receive(100, 0, Deadline::after(50ms))); // nothing more: none by the deadline
    CHECK_THAT(thrown<weft::UsageError>([&] { a.send({}, {}, Deadline::after(1s)); }),
               Catch::Contains("a lane message of 0 B"));
}

TEST_CASE("lane channel: connecting to a name nobody holds says the peer is gone",
          "[lane][channel]")
{
    std::string name;
    {
        UnixListener gone = UnixListener::open();
        name = gone.name();
    }
    try {
        UnixChannel::connect(name, Deadline::after(5s));
        FAIL("connected to a closed listener");
    } catch (const weft::Error& e) {
        CHECK(e.peer_lost());
        CHECK_THAT(e.what(), Catch::Contains("the peer has gone"));
    }
    using weft::test::thrown;
    CHECK_THAT(thrown<weft::UsageError>(
                   [] { UnixChannel::connect("", Deadline::after(1s)); }),
               Catch::Contains("is not a lane listener's name"));
}
