// SPDX-License-Identifier: MIT
// The etcd store beyond the Store contract (stores/contract.cpp runs that on it
// too): members' live keys under leases, against a local etcd this test
// starts. A watch on the members' prefix sees each change: a member killed
// (its key expires within the TTL), one that closes (its key goes at once),
// one that joins late; etcd that is not there, or stops under a watch, is an
// error naming it.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "support/etcd.hpp"
#include "support/peer_process.hpp"
#include "support/skip.hpp"
#include "weft/base/error.hpp"
#include "weft/stores/etcd_store.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

std::string text(const std::vector<std::byte>& v)
{
    return {reinterpret_cast<const char*>(v.data()), v.size()};
}

} // namespace

TEST_CASE("etcd store: an etcd is here to test with", "[store][etcd]")
{
    if (const auto why = test::Etcd::unavailable())
        WARN("SKIPPED: the etcd store's tests: " << *why);
}

TEST_CASE("etcd store: members join and leave: a watch on their prefix sees each change, a "
          "killed member's key expires within its TTL, a closed one's goes at once, a late one "
          "is seen",
          "[store][etcd][process]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    const std::string at = test::Etcd::shared().endpoint();
    const std::string prefix = fmt::format("svc-{}/", ::getpid());
    // Member "a" is a process (programs/store_member.cpp, killed later).
    test::PeerProcess a(WEFT_TEST_STORE_MEMBER_PATH,
                        {"etcd", at, prefix, "live", "members/a", "10.0.0.1:7000"});
    REQUIRE(a.first_line() == "READY");
    EtcdStore survivor(at, Deadline::after(30s), prefix, 1s);
    EtcdWatch members = survivor.watch("members/", Deadline::after(10s));
    // The watch starts with who is there.
    auto change = members.next(Deadline::after(5s));
    REQUIRE(change);
    CHECK(change->kind == EtcdEvent::Kind::put);
    CHECK(change->key == "members/a");
    CHECK(text(change->value) == "10.0.0.1:7000");
    CHECK(survivor.keys("members/") == std::vector<std::string>{"members/a"});

    // A member that joins late, in a thread: seen at once.
    std::optional<EtcdStore> b(std::in_place, at, Deadline::after(30s), prefix, 1s);
    b->set_while_alive("members/b", std::string_view("10.0.0.2:7000"));
    change = members.next(Deadline::after(5s));
    REQUIRE(change);
    CHECK(change->kind == EtcdEvent::Kind::put);
    CHECK(change->key == "members/b");
    CHECK(text(change->value) == "10.0.0.2:7000");

    // "a" is killed: its lease is no longer kept alive, and its key expires.
    const auto killed = Clock::now();
    a.kill_now();
    change = members.next(Deadline::after(10s));
    REQUIRE(change);
    CHECK(Clock::now() - killed < 5s); // TTL 1 s, and etcd's expiry tick
    CHECK(change->kind == EtcdEvent::Kind::erase);
    CHECK(change->key == "members/a");
    CHECK(survivor.keys("members/") == std::vector<std::string>{"members/b"});

    // "b" closes: its lease is revoked, its key goes at once.
    const auto closed = Clock::now();
    b.reset();
    change = members.next(Deadline::after(5s));
    REQUIRE(change);
    CHECK(Clock::now() - closed < 1s);
    CHECK(change->kind == EtcdEvent::Kind::erase);
    CHECK(change->key == "members/b");
    CHECK(survivor.keys("members/").empty());
    // Nothing else happened under the prefix.
    CHECK_FALSE(members.next(Deadline::after(200ms)));
    // Plain keys stay: what a service publishes for good is not a member's.
    survivor.set("config/x", std::string_view("1"));
    CHECK(survivor.contains("config/x"));
}

TEST_CASE("etcd store: a watch whose etcd stops ends with an error saying so, and a watch "
          "ends at once when dropped",
          "[store][etcd]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    std::optional<test::Etcd> etcd(std::in_place);
    EtcdStore s(etcd->endpoint(), Deadline::after(30s), "w/", 1s);
    const auto before = Clock::now();
    { EtcdWatch gone = s.watch("y/", Deadline::after(10s)); }
    CHECK(Clock::now() - before < 500ms); // no poll waited out
    EtcdWatch w = s.watch("x/", Deadline::after(10s));
    s.set("x/1", std::string_view("one"));
    auto change = w.next(Deadline::after(5s));
    REQUIRE(change);
    CHECK(change->key == "x/1");
    etcd.reset();
    try {
        for (int i = 0; i < 3; ++i)
            (void)w.next(Deadline::after(10s));
        FAIL("a watch on a stopped etcd gave no error");
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::Contains("watch"));
    }
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

TEST_CASE("etcd store: a barrier's arrivals stay out of the store's keys and watch: 6 members "
          "see one change, the barrier's key, and a key beginning with NUL is refused",
          "[store][etcd]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    const std::string at = test::Etcd::shared().endpoint();
    const std::string prefix = fmt::format("bar-{}/", ::getpid());
    constexpr std::size_t n = 6;
    std::vector<std::unique_ptr<EtcdStore>> members;
    for (std::size_t i = 0; i < n; ++i)
        members.push_back(std::make_unique<EtcdStore>(at, Deadline::after(30s), prefix, 5s));
    EtcdWatch all = members[0]->watch("", Deadline::after(10s));
    for (int round = 0; round < 2; ++round) {
        const std::string key = fmt::format("b{}", round);
        std::vector<std::thread> ts;
        std::atomic<int> through{0};
        for (auto& m : members)
            ts.emplace_back([&] {
                m->barrier(key, n, Deadline::after(20s));
                ++through;
            });
        for (auto& t : ts)
            t.join();
        CHECK(through == static_cast<int>(n));
        // The whole store watched: the barrier's key, once, and nothing else.
        const auto change = all.next(Deadline::after(5s));
        REQUIRE(change);
        CHECK(change->key == key);
        CHECK_FALSE(all.next(Deadline::after(300ms)));
    }
    CHECK(members[0]->keys("") == std::vector<std::string>{"b0", "b1"});
    // A barrier short of a member says how many came, the arrivals counted.
    try {
        members[0]->barrier("short", 2, Deadline::after(1500ms));
        FAIL("a barrier of 2 with one member returned");
    } catch (const TimeoutError& e) {
        CHECK_THAT(e.what(), Catch::Contains("1 of 2"));
    }
    try {
        members[0]->set(std::string_view("\0x", 2), std::string_view("1"));
        FAIL("a key beginning with NUL was taken");
    } catch (const UsageError& e) {
        CHECK_THAT(e.what(), Catch::Contains("NUL"));
    }
}
