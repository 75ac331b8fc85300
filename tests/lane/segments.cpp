// SPDX-License-Identifier: MIT
// The lane's memory (src/lane/segment.hpp): what a co-located peer holding the
// descriptor can and cannot do to the owner's bytes, tried from another
// process that got the descriptor the way a peer does (SCM_RIGHTS).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "child.hpp"
#include "segment.hpp"
#include "support/thrown.hpp"
#include "unix_channel.hpp"

using namespace std::chrono_literals;
using weft::Deadline;
using weft::lane::PeerAccess;
using weft::lane::Segment;
using weft::lane::UnixChannel;
using weft::lane::UnixListener;

namespace {

constexpr std::size_t size = 64 * 1024;

weft::detail::Fd dup_fd(int fd) { return weft::detail::Fd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)); }

// Every way a peer could write memory it was given read-only. Each line says
// what it tried and whether the kernel let it; the peer is its own process,
// which received the descriptor over the lane's channel.
std::string attack(int fd)
{
    std::string out;
    auto tried = [&out](const char* what, bool allowed) {
        out += fmt::format("{}={} ", what, allowed ? "ALLOWED" : "refused");
    };
    void* rw = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    tried("mmap-rw", rw != MAP_FAILED);
    void* ro = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (ro == MAP_FAILED)
        return "read-only mmap failed";
    tried("mprotect-rw", ::mprotect(ro, size, PROT_READ | PROT_WRITE) == 0);
    tried("madvise-remove", ::madvise(ro, size, MADV_REMOVE) == 0);
    const char junk[8] = "XXXXXXX";
    tried("pwrite", ::pwrite(fd, junk, sizeof junk, 0) > 0);
    tried("shrink", ::ftruncate(fd, 4096) == 0);
    tried("grow", ::ftruncate(fd, 2 * size) == 0);
    tried("punch-hole", ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0);
    tried("add-seal", ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0);
    const int again = ::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDWR);
    if (again >= 0) { // the open itself may succeed; nothing through it may write
        tried("reopen-write", ::pwrite(again, junk, sizeof junk, 0) > 0);
        void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0);
        tried("reopen-mmap-rw", m != MAP_FAILED);
        tried("reopen-shrink", ::ftruncate(again, 0) == 0);
    }
    return out;
}

// A peer process: connects to `name`, takes the descriptor it is sent, and
// writes back what `body` made of it.
weft::detail::Child peer(const std::string& name, std::string (*body)(int))
{
    return weft::detail::Child::fork([name, body](int to_parent) {
        UnixChannel ch = UnixChannel::connect(name, Deadline::after(10s));
        auto m = ch.receive(64, 1, Deadline::after(10s));
        if (!m || m->fds.size() != 1)
            return 2;
        const std::string said = body(m->fds[0].get()) + "\n";
        return ::write(to_parent, said.data(), said.size()) == static_cast<ssize_t>(said.size())
                   ? 0
                   : 3;
    });
}

std::string hand_over(const Segment& seg, weft::detail::Child& child, UnixListener& listener)
{
    auto ch = listener.accept(Deadline::after(10s));
    REQUIRE(ch);
    REQUIRE(ch->peer().pid == child.pid());
    const int fds[] = {seg.fd()};
    ch->send(std::as_bytes(std::span("segment")), fds, Deadline::after(10s));
    std::string said = child.read_until('\n', Deadline::after(30s));
    CHECK(child.finish(Deadline::after(10s)) == 0);
    return said;
}

} // namespace

TEST_CASE("lane segment: a read-only export resists every write a peer process tries",
          "[lane][memory]")
{
    Segment seg = Segment::create(size, "test");
    std::memset(seg.data(), 0x5a, seg.size());
    seg.seal(PeerAccess::read);
    UnixListener listener = UnixListener::open();
    auto child = peer(listener.name(), attack);
    const std::string said = hand_over(seg, child, listener);
    INFO(said);
    CHECK(said.find("refused") != std::string::npos);
    CHECK(said.find("ALLOWED") == std::string::npos);
    // The owner's bytes are untouched, and the owner still writes them.
    for (std::size_t i = 0; i < seg.size(); ++i)
        REQUIRE(seg.data()[i] == std::byte{0x5a});
    seg.data()[7] = std::byte{1};
    CHECK(seg.data()[7] == std::byte{1});
    struct stat st {};
    REQUIRE(::fstat(seg.fd(), &st) == 0);
    CHECK(static_cast<std::size_t>(st.st_size) == seg.size());
}

TEST_CASE("lane segment: a writable export cannot be truncated or grown by a peer",
          "[lane][memory]")
{
    Segment seg = Segment::create(size, "test");
    seg.seal(PeerAccess::read_write);
    UnixListener listener = UnixListener::open();
    auto child = peer(listener.name(), [](int fd) {
        std::string out;
        out += ::ftruncate(fd, 0) == 0 ? "shrink=ALLOWED " : "shrink=refused ";
        out += ::ftruncate(fd, 2 * size) == 0 ? "grow=ALLOWED " : "grow=refused ";
        out += ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0 ? "seal=ALLOWED " : "seal=refused ";
        // It may write, as exported.
        void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            return std::string("mmap-rw=refused");
        std::memcpy(static_cast<char*>(m) + 100, "peer", 4);
        return out + "wrote";
    });
    const std::string said = hand_over(seg, child, listener);
    INFO(said);
    CHECK(said == "shrink=refused grow=refused seal=refused wrote\n");
    CHECK(std::memcmp(seg.data() + 100, "peer", 4) == 0);
    seg.data()[seg.size() - 1] = std::byte{9}; // the whole of it is still there: no SIGBUS
}

TEST_CASE("lane segment: a child forked later does not inherit the owner's writable mapping",
          "[lane][memory]")
{
    Segment seg = Segment::create(size, "test");
    seg.seal(PeerAccess::read);
    const auto addr = reinterpret_cast<std::uintptr_t>(seg.data());
    auto child = weft::detail::Child::fork([addr](int) {
        unsigned char vec[1];
        // mincore: ENOMEM where nothing is mapped.
        return ::mincore(reinterpret_cast<void*>(addr), 4096, vec) != 0 && errno == ENOMEM ? 0 : 1;
    });
    CHECK(child.finish(Deadline::after(10s)) == 0);
}

TEST_CASE("lane segment: a peer maps only what was exported, sealed and of the size announced",
          "[lane][memory]")
{
    Segment ro = Segment::create(size, "test");
    std::memcpy(ro.data(), "hello", 5);
    ro.seal(PeerAccess::read);
    Segment view = Segment::map(dup_fd(ro.fd()), PeerAccess::read, ro.size());
    CHECK(std::memcmp(view.data(), "hello", 5) == 0);
    ro.data()[0] = std::byte{'j'}; // one memory: the peer sees the owner's writes at once
    CHECK(std::memcmp(view.data(), "jello", 5) == 0);

    using weft::test::thrown;
    CHECK_THAT(thrown<weft::UsageError>(
                   [&] { Segment::map(dup_fd(ro.fd()), PeerAccess::read_write, ro.size()); }),
               Catch::Contains("exported this segment read-only"));
    CHECK_THAT(thrown<weft::UsageError>(
                   [&] { Segment::map(dup_fd(ro.fd()), PeerAccess::read, ro.size() + 4096); }),
               Catch::Contains("where 69632 B were announced"));
    Segment unsealed = Segment::create(size, "test");
    CHECK_THAT(thrown<weft::UsageError>([&] {
                   Segment::map(dup_fd(unsealed.fd()), PeerAccess::read, unsealed.size());
               }),
               Catch::Contains("SIGBUS"));
    weft::detail::Fd not_memfd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    CHECK_THAT(thrown<weft::UsageError>(
                   [&] { Segment::map(std::move(not_memfd), PeerAccess::read, 4096); }),
               Catch::Contains("not a sealable memfd"));
    CHECK_THAT(thrown<weft::UsageError>([&] { ro.seal(PeerAccess::read); }),
               Catch::Contains("sealed already"));
}

TEST_CASE("lane segment: detaching peers keeps the owner's bytes and addresses, and cuts the "
          "peer's writes off",
          "[lane][memory][revoke]")
{
    Segment seg = Segment::create(size, "test");
    seg.seal(PeerAccess::read_write);
    Segment peer_view = Segment::map(dup_fd(seg.fd()), PeerAccess::read_write, seg.size());
    std::memcpy(peer_view.data(), "before", 6);
    REQUIRE(std::memcmp(seg.data(), "before", 6) == 0);
    std::byte* const where = seg.data();
    const int old_fd = seg.fd();
    struct stat old_st {};
    REQUIRE(::fstat(old_fd, &old_st) == 0);

    seg.detach_peers();
    CHECK(seg.data() == where);
    CHECK(std::memcmp(seg.data(), "before", 6) == 0);
    std::memcpy(peer_view.data(), "AFTER!", 6); // the peer's old mapping reaches orphaned pages
    CHECK(std::memcmp(seg.data(), "before", 6) == 0);
    std::memcpy(seg.data() + 6, "-owner", 6); // and the owner's writes no longer reach the peer
    CHECK(std::memcmp(peer_view.data() + 6, "-owner", 6) != 0);
    struct stat new_st {};
    REQUIRE(::fstat(seg.fd(), &new_st) == 0);
    CHECK(new_st.st_ino != old_st.st_ino);
    CHECK_FALSE(seg.sealed()); // a fresh descriptor: sealed again before it is shared
    seg.seal(PeerAccess::read);
}
