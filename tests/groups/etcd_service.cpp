// SPDX-License-Identifier: MIT
// The etcd service example (examples/03_service): a service whose members
// come and go, against a local etcd this test starts. Two members join and
// write; one is killed and the service sees it go within its lease's TTL; a
// member joins late, writes and leaves; every block is verified by the
// service, which ends cleanly.
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/etcd.hpp"
#include "support/spawn.hpp"

using namespace std::chrono_literals;
using weft::test::finish;
using weft::test::spawn;
using weft::test::Spawned;
using weft::test::wait_for_output;

TEST_CASE("service on etcd: members join, one is killed and its lease expires, a late one "
          "joins and leaves: the service sees each change and verifies every block",
          "[service][etcd][process]")
{
    if (const auto why = weft::test::Etcd::unavailable()) {
        WARN("SKIPPED: " << *why);
        return;
    }
    const std::vector<std::string> env{
        fmt::format("WEFT_ETCD={}", weft::test::Etcd::shared().endpoint()),
        fmt::format("WEFT_SERVICE=test-{}", ::getpid())};
    std::vector<Spawned> service;
    service.push_back(spawn({WEFT_SERVICE_EXAMPLE_PATH, "serve", "120"}, env, "service"));
    REQUIRE(wait_for_output(service[0], "serving on", 30s));

    std::vector<Spawned> stay; // members that stay until killed
    stay.push_back(spawn({WEFT_SERVICE_EXAMPLE_PATH, "join", "a", "3", "stay"}, env, "a"));
    stay.push_back(spawn({WEFT_SERVICE_EXAMPLE_PATH, "join", "b", "5", "stay"}, env, "b"));
    for (const Spawned& m : stay)
        CHECK(wait_for_output(m, "READY", 60s));
    CHECK(wait_for_output(service[0], "member a: block 2 verified", 10s));
    CHECK(wait_for_output(service[0], "member b: block 4 verified", 10s));

    // "a" dies: its lease is no longer kept alive (TTL 2 s), and its key expires.
    const auto killed = weft::Clock::now();
    ::kill(stay[0].pid, SIGKILL);
    CHECK(wait_for_output(service[0], "member a left", 10s));
    CHECK(weft::Clock::now() - killed < 5s);

    // A member that joins late, writes and leaves (its lease revoked at once).
    std::vector<Spawned> late;
    late.push_back(spawn({WEFT_SERVICE_EXAMPLE_PATH, "join", "c", "4"}, env, "c"));
    finish(late);
    INFO("member c printed:\n" << late[0].output);
    CHECK(late[0].status == 0);
    CHECK(wait_for_output(service[0], "member c: block 3 verified", 10s));
    CHECK(wait_for_output(service[0], "member c left", 5s));

    ::kill(stay[1].pid, SIGKILL);
    CHECK(wait_for_output(service[0], "member b left", 10s));
    ::kill(service[0].pid, SIGTERM);
    finish(service);
    finish(stay);
    INFO("the service printed:\n" << service[0].output);
    CHECK(service[0].status == 0);
    CHECK(service[0].output.find("WRONG") == std::string::npos);
    CHECK(service[0].output.find("service ends: every block verified") != std::string::npos);
    // Each change seen once, in order: a and b joined, a left, c joined and left, b left.
    const auto at = [&](const std::string& line) { return service[0].output.find(line); };
    CHECK(at("member a joined") < at("member a left"));
    CHECK(at("member a left") < at("member c joined"));
    CHECK(at("member c joined") < at("member c left"));
    CHECK(at("member c left") < at("member b left"));
    CHECK(at("member b left") != std::string::npos);
}
