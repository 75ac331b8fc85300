// SPDX-License-Identifier: MIT
// The etcd service example (examples/05_service): a service whose members
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
#include "support/process.hpp"
#include "support/skip.hpp"

using namespace std::chrono_literals;
using weft::test::Command;
using weft::test::Process;

TEST_CASE("service on etcd: members join, one is killed and its lease expires, a late one "
          "joins and leaves: the service sees each change and verifies every block",
          "[service][etcd][process]")
{
    WEFT_SKIP_IF(weft::test::Etcd::unavailable());
    const std::vector<std::string> env{
        fmt::format("WEFT_ETCD={}", weft::test::Etcd::shared().endpoint()),
        fmt::format("WEFT_SERVICE=test-{}", ::getpid())};
    Process service(Command{{WEFT_SERVICE_EXAMPLE_PATH}, env}, "service");
    REQUIRE(service.wait_for_output("serving on", 30s));

    std::vector<Process> stay; // members that stay until killed
    stay.emplace_back(Command{{WEFT_MEMBER_EXAMPLE_PATH, "a", "3", "stay"}, env}, "a");
    stay.emplace_back(Command{{WEFT_MEMBER_EXAMPLE_PATH, "b", "5", "stay"}, env}, "b");
    for (const Process& m : stay)
        CHECK(m.wait_for_output("READY", 60s));
    CHECK(service.wait_for_output("member a: block 2 verified", 10s));
    CHECK(service.wait_for_output("member b: block 4 verified", 10s));

    // "a" dies: its lease is no longer kept alive (TTL 2 s), and its key expires.
    const auto killed = weft::Clock::now();
    stay[0].signal(SIGKILL);
    CHECK(service.wait_for_output("member a left", 10s));
    CHECK(weft::Clock::now() - killed < 5s);

    // A member that joins late, writes and leaves (its lease revoked at once).
    const auto late = weft::test::run({{WEFT_MEMBER_EXAMPLE_PATH, "c", "4"}, env}, 180s, "c");
    INFO("member c printed:\n" << late.output);
    CHECK(late.status == 0);
    CHECK(service.wait_for_output("member c: block 3 verified", 10s));
    CHECK(service.wait_for_output("member c left", 5s));

    stay[1].signal(SIGKILL);
    CHECK(service.wait_for_output("member b left", 10s));
    service.signal(SIGTERM);
    (void)service.finish();
    weft::test::finish_all(stay);
    const std::string said = service.output();
    INFO("the service printed:\n" << said);
    CHECK(service.status() == 0);
    CHECK(said.find("WRONG") == std::string::npos);
    CHECK(said.find("service ends: every block verified") != std::string::npos);
    // Each change seen once, in order: a and b joined, a left, c joined and left, b left.
    const auto at = [&](const std::string& line) { return said.find(line); };
    CHECK(at("member a joined") < at("member a left"));
    CHECK(at("member a left") < at("member c joined"));
    CHECK(at("member c joined") < at("member c left"));
    CHECK(at("member c left") < at("member b left"));
    CHECK(at("member b left") != std::string::npos);
}
