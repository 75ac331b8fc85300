// SPDX-License-Identifier: MIT
// The Store contract, the same cases on every store: set/get/erase, a get
// that waits for a later set, a get that times out naming its key, add()
// atomic across members, multi-get, barrier; members as threads, and for the
// file and TCP stores as processes.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/etcd.hpp"
#include "support/every_store.hpp"
#include "support/process.hpp"
#include "support/sockets.hpp"
#include "support/temp_dir.hpp"
#include "support/threads.hpp"
#include "weft/base/error.hpp"
#include "weft/stores/etcd_store.hpp"
#include "weft/stores/store.hpp"
#include "weft/stores/tcp_store.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::Opened;
using weft::test::TempDir;
using weft::test::store_kinds;


TEST_CASE("store: set, get, contains, erase, binary values, keys checked", "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    CHECK_FALSE(s->contains("a"));
    s->set("a", std::string_view("one"));
    CHECK(s->contains("a"));
    CHECK(s->get_text("a", Deadline::after(1s)) == "one");
    s->set("a", std::string_view("two")); // replaces
    CHECK(s->get_text("a", Deadline::after(1s)) == "two");
    std::vector<std::byte> binary(1000);
    for (std::size_t i = 0; i < binary.size(); ++i)
        binary[i] = static_cast<std::byte>(i * 7);
    s->set("rank/3/addr", binary); // '/' and every byte value
    CHECK(s->get("rank/3/addr", Deadline::after(1s)) == binary);
    s->set("empty", std::span<const std::byte>{});
    CHECK(s->get("empty", Deadline::after(1s)).empty());
    CHECK(s->erase("a"));
    CHECK_FALSE(s->erase("a"));
    CHECK_FALSE(s->contains("a"));
    CHECK_THROWS_AS(s->set("", std::string_view("x")), UsageError);
    CHECK_THROWS_AS(s->set(std::string(201, 'k'), std::string_view("x")), UsageError);
    CHECK_THROWS_AS(s->add("rank/3/addr", 1), UsageError); // not a number
}

TEST_CASE("store: get waits for a later set, and times out naming the key", "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    std::thread late([&] {
        std::this_thread::sleep_for(50ms);
        s->set("late", std::string_view("here"));
    });
    CHECK(s->get_text("late", Deadline::after(10s)) == "here");
    late.join();
    const auto start = Clock::now();
    try {
        (void)s->get("never-set", Deadline::after(100ms));
        FAIL("get of a key nobody sets returned");
    } catch (const TimeoutError& e) {
        CHECK(std::string(e.what()).find("never-set") != std::string::npos);
        CHECK(std::string(e.what()).find(s->describe()) != std::string::npos);
    }
    const auto took = Clock::now() - start;
    CHECK(took >= 100ms);
    CHECK(took < 5s);

    // An erased key is waited for again, and its next value is the one read
    // (etcd's waits read a mirror of the store's keys: an erase must leave it).
    CHECK(s->erase("late"));
    CHECK_THROWS_AS(s->get("late", Deadline::after(200ms)), TimeoutError);
    std::thread again([&] {
        std::this_thread::sleep_for(50ms);
        s->set("late", std::string_view("again"));
    });
    CHECK(s->get_text("late", Deadline::after(10s)) == "again");
    again.join();
    s->set("late", std::string_view("third"));
    CHECK(s->get_text("late", Deadline::after(1s)) == "third"); // a set is read at once
}

TEST_CASE("store: add is atomic across 8 members, multi-get, barrier", "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    constexpr int n = 8;
    constexpr int adds = 200;
    std::vector<std::vector<std::int64_t>> seen(n);
    weft::test::on_threads(n, [&](std::size_t me) {
        for (int i = 0; i < adds; ++i)
            seen[me].push_back(s->add("counter", 1));
        s->set(fmt::format("member/{}", me), fmt::format("address of {}", me));
        s->barrier("after-adds", n, Deadline::after(30s));
        // Everyone's key is there now: one multi-get.
        std::vector<std::string> keys;
        for (int j = 0; j < n; ++j)
            keys.push_back(fmt::format("member/{}", j));
        const auto values = s->get(keys, Deadline::after(1s));
        for (int j = 0; j < n; ++j) {
            const auto& v = values[static_cast<std::size_t>(j)];
            if (std::string(reinterpret_cast<const char*>(v.data()), v.size()) !=
                fmt::format("address of {}", j))
                throw std::runtime_error(fmt::format("member {} read a wrong value of {}", me, j));
        }
        s->barrier("after-reads", n, Deadline::after(30s));
    });
    std::set<std::int64_t> all;
    for (const auto& v : seen)
        all.insert(v.begin(), v.end());
    CHECK(all.size() == static_cast<std::size_t>(n * adds)); // every result distinct
    CHECK(*all.begin() == 1);
    CHECK(*all.rbegin() == n * adds);
    CHECK(s->get_text("counter", Deadline::after(1s)) == std::to_string(n * adds));
    CHECK(s->add("counter", 0) == n * adds);
}

TEST_CASE("store: a barrier short of members times out saying how many arrived", "[store]")
{
    const Opened opened(GENERATE(range(0, static_cast<int>(store_kinds().size()))));
    INFO(opened.kind.name);
    const auto& s = opened.store;
    try {
        weft::test::on_threads(2,
                               [&](std::size_t) { s->barrier("three", 3, Deadline::after(200ms)); });
        FAIL("a barrier of 3 with 2 members returned");
    } catch (const TimeoutError& e) {
        CHECK(std::string(e.what()).find("2 of 3 members") != std::string::npos);
    }
}

TEST_CASE("store: members as processes (file store, TCP store): add, barrier, every key read",
          "[store][process]")
{
    TempDir dir;
    std::optional<StoreServer> server;
    const bool tcp = GENERATE(false, true);
    INFO((tcp ? "tcp" : "file"));
    if (tcp)
        server.emplace("127.0.0.1", 0);
    const auto open = [&]() -> std::unique_ptr<Store> {
        if (tcp)
            return std::make_unique<TcpStore>(server->address(), Deadline::after(10s));
        return std::make_unique<FileStore>(dir.path);
    };
    // Members as processes of their own (programs/store_member.cpp): 50 adds
    // each, a key each, every key read back.
    constexpr int n = 8;
    std::vector<test::Process> members;
    for (int me = 0; me < n; ++me)
        members.emplace_back(test::Command{{WEFT_TEST_STORE_MEMBER_PATH, tcp ? "tcp" : "file",
                                            tcp ? server->address() : dir.path, "count",
                                            std::to_string(me), std::to_string(n)}},
                             fmt::format("member-{}", me));
    test::finish_all(members);
    for (const test::Process& m : members) {
        INFO("a member printed: " << m.output());
        CHECK(WIFEXITED(m.wait_status()));
        CHECK(WEXITSTATUS(m.wait_status()) == 0);
    }
    const auto last = open();
    CHECK(last->add("counter", 0) == n * 50);
    if (tcp) { // the children's connections closed with them: this one is left
        const auto until = Clock::now() + 10s;
        while (server->members() != 1 && Clock::now() < until)
            std::this_thread::sleep_for(10ms);
        CHECK(server->members() == 1);
    }
}

TEST_CASE("store: the TCP store's shared secret: the same one works, another or none is refused "
          "saying so",
          "[store][secret]")
{
    const std::string secret = "0123456789abcdef-store";
    StoreServer server("127.0.0.1", 0, secret);
    TcpStore member(server.address(), Deadline::after(10s), secret);
    member.set("k", std::string_view("v"));
    CHECK(member.get_text("k", Deadline::after(1s)) == "v");
    try {
        TcpStore wrong(server.address(), Deadline::after(10s), "another-secret-of-16-bytes");
        FAIL("a member with another secret was let in");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("secret") != std::string::npos);
    }
    try {
        TcpStore none(server.address(), Deadline::after(10s));
        FAIL("a member without the secret was let in");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find("requires a shared secret") != std::string::npos);
    }
    CHECK(member.get_text("k", Deadline::after(1s)) == "v"); // the member was not disturbed
}

TEST_CASE("store: a stranger on the TCP store's port costs its members nothing, and a server "
          "that goes away is an error naming it, not a hang",
          "[store][faults]")
{
    std::optional<StoreServer> server(std::in_place, "127.0.0.1", 0);
    const std::string address = server->address();
    TcpStore member(address, Deadline::after(10s));
    // A silent stranger and one that speaks garbage.
    const int silent = weft::test::loopback_connect(server->port());
    const int garbage = weft::test::loopback_connect(server->port());
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    REQUIRE(::write(garbage, junk, sizeof junk - 1) == static_cast<ssize_t>(sizeof junk - 1));
    for (int i = 0; i < 100; ++i)
        CHECK(member.add("n", 1) == i + 1);
    std::thread waiter([&] {
        try {
            (void)member.get("never", Deadline::after(60s));
        } catch (const Error&) {
        }
    });
    std::this_thread::sleep_for(100ms);
    const auto start = Clock::now();
    server.reset(); // the server exits while a get is parked there
    waiter.join();
    CHECK(Clock::now() - start < 5s);
    try {
        member.set("after", std::string_view("x"));
        FAIL("a call after the server went away returned");
    } catch (const Error& e) {
        CHECK(std::string(e.what()).find(address) != std::string::npos);
    }
    ::close(silent);
    ::close(garbage);
}

TEST_CASE("store: a watched get whose watch reports a departure looks once more: a member that "
          "set the key and then ended has not failed the wait",
          "[store]")
{
    // The first slice of the wait ends just before the key is set (a store
    // that times out its first get); the watch then finds a member gone. The
    // key is there by then: the get returns it. Without the key, the error stands.
    struct LateStore final : Store {
        using Store::get;
        using Store::set;
        MemoryStore inner;
        int gets = 0;
        void set(std::string_view k, std::span<const std::byte> v) override { inner.set(k, v); }
        std::vector<std::byte> get(std::string_view k, Deadline d) override
        {
            if (gets++ == 0) {
                inner.set("open", std::string_view("1")); // set while the slice ends
                timeout(k);
            }
            return inner.get(k, d);
        }
        std::int64_t add(std::string_view k, std::int64_t d) override { return inner.add(k, d); }
        bool contains(std::string_view k) override { return inner.contains(k); }
        bool erase(std::string_view k) override { return inner.erase(k); }
        std::string describe() const override { return "late store"; }
    };
    const auto departed = [] { throw Error("Group", -FI_ECONNRESET, "", "rank(s) 1 left"); };
    LateStore s;
    const auto v = s.Store::get("open", Deadline::after(10s), departed);
    CHECK(std::string(reinterpret_cast<const char*>(v.data()), v.size()) == "1");
    MemoryStore empty;
    CHECK_THROWS_WITH(empty.Store::get("never", Deadline::after(10s), departed),
                      Catch::Contains("rank(s) 1 left"));
}

TEST_CASE("store: a file store's live key is live while its store is open, and not after, "
          "another member cannot take it meanwhile",
          "[store]")
{
    TempDir dir;
    FileStore watcher(dir.path);
    {
        FileStore member(dir.path);
        member.set_while_alive("alive/3", std::string_view("1"));
        CHECK(watcher.contains("alive/3"));
        CHECK(watcher.live("alive/3"));
        FileStore other(dir.path);
        CHECK_THROWS_AS(other.set_while_alive("alive/3", std::string_view("1")), UsageError);
        member.set_while_alive("alive/3", std::string_view("2")); // its own: set again
        CHECK(watcher.get_text("alive/3", Deadline::after(1s)) == "2");
    }
    // Its store closed (as when its process ends, however it ends): the lock is gone.
    CHECK(watcher.contains("alive/3"));
    CHECK_FALSE(watcher.live("alive/3"));
    // A plain key is live while it exists; an absent one is not.
    watcher.set("plain", std::string_view("x"));
    CHECK(watcher.live("plain"));
    CHECK_FALSE(watcher.live("absent"));
    // A new member may take the key of one that ended.
    FileStore next(dir.path);
    next.set_while_alive("alive/3", std::string_view("1"));
    CHECK(watcher.live("alive/3"));
}
