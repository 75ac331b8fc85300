// SPDX-License-Identifier: MIT
// The etcd store beyond the Store contract (tests/store.cpp runs that on it
// too): members' live keys under leases, against a local etcd this test
// starts. A member killed: its key expires within the TTL; a member that
// closes: its key goes at once; a member that joins late is seen; etcd that
// is not there is an error naming it.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "support/etcd.hpp"
#include "weft/error.hpp"
#include "weft/etcd_store.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

/// Waits (up to `limit`) until `members/` lists exactly `want`; how long it took.
Clock::duration until_members(EtcdStore& s, const std::vector<std::string>& want,
                              Clock::duration limit)
{
    const auto start = Clock::now();
    while (s.keys("members/") != want && Clock::now() - start < limit)
        std::this_thread::sleep_for(20ms);
    return Clock::now() - start;
}

} // namespace

TEST_CASE("etcd store: an etcd is here to test with", "[store][etcd]")
{
    if (const auto why = test::Etcd::unavailable())
        WARN("SKIPPED: the etcd store's tests: " << *why);
}

TEST_CASE("etcd store: members join and leave: a killed member's key expires within its TTL, a "
          "closed one's goes at once, a late one is seen",
          "[store][etcd][process]")
{
    if (const auto why = test::Etcd::unavailable()) {
        WARN("SKIPPED: " << *why);
        return;
    }
    const std::string at = test::Etcd::shared().endpoint();
    const std::string prefix = fmt::format("svc-{}/", ::getpid());
    // Member "a" is a process (killed later); it joins before this one opens
    // its own store (no fork after threads).
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t a = fork();
    REQUIRE(a >= 0);
    if (a == 0) {
        try {
            EtcdStore s(at, Deadline::after(30s), prefix, 1s);
            s.set_while_alive("members/a", std::string_view("10.0.0.1:7000"));
            (void)!write(ready[1], "1", 1);
            std::this_thread::sleep_for(120s); // killed before this ends
        } catch (...) {
        }
        _exit(1);
    }
    ::close(ready[1]); // a child that fails closes the pipe: the read ends
    char byte = 0;
    const bool joined = read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    if (!joined)
        ::waitpid(a, nullptr, 0);
    REQUIRE(joined);
    EtcdStore watcher(at, Deadline::after(30s), prefix, 1s);
    CHECK(watcher.keys("members/") == std::vector<std::string>{"members/a"});
    CHECK(watcher.get_text("members/a", Deadline::after(1s)) == "10.0.0.1:7000");

    // A member that joins late, in a thread: seen at once.
    std::optional<EtcdStore> b(std::in_place, at, Deadline::after(30s), prefix, 1s);
    b->set_while_alive("members/b", std::string_view("10.0.0.2:7000"));
    CHECK(until_members(watcher, {"members/a", "members/b"}, 5s) < 5s);

    // "a" is killed: its lease is no longer kept alive, and its key expires.
    const auto killed = Clock::now();
    ::kill(a, SIGKILL);
    ::waitpid(a, nullptr, 0);
    const auto took = until_members(watcher, {"members/b"}, 10s);
    CHECK(watcher.keys("members/") == std::vector<std::string>{"members/b"});
    CHECK(Clock::now() - killed < 5s); // TTL 1 s, and etcd's expiry tick
    (void)took;

    // "b" closes: its lease is revoked, its key goes at once.
    b.reset();
    CHECK(until_members(watcher, {}, 5s) < 1s);
    CHECK(watcher.keys("members/").empty());
    // Plain keys stay: what a service publishes for good is not a member's.
    watcher.set("config/x", std::string_view("1"));
    CHECK(watcher.contains("config/x"));
}

TEST_CASE("etcd store: no etcd at the address is an error naming it, after the deadline",
          "[store][etcd]")
{
    const auto start = Clock::now();
    try {
        EtcdStore s("127.0.0.1:1", Deadline::after(300ms));
        FAIL("an etcd store opened with nothing at 127.0.0.1:1");
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:1"));
        CHECK_THAT(e.what(), Catch::Contains("is etcd running there"));
    }
    CHECK(Clock::now() - start < 5s);
}
