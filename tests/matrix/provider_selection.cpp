// SPDX-License-Identifier: MIT
// Provider choice: the order, the overrides, and the report printed every run.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "support/cases.hpp"
#include "support/process.hpp"
#include "weft/peers/node.hpp"

using namespace weft;

namespace {

struct EnvGuard {
    explicit EnvGuard(const char* name, const char* value) : name_(name)
    {
        if (const char* old = std::getenv(name))
            old_ = old;
        if (value != nullptr)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~EnvGuard()
    {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    const char* name_;
    std::optional<std::string> old_;
};

} // namespace

TEST_CASE("select: this machine has a non-RDMA baseline (tcp or shm)", "[select]")
{
    const bool tcp = !test::unavailable({"tcp", EndpointKind::msg});
    const bool shm = !test::unavailable({"shm", EndpointKind::rdm});
    INFO("the provider matrix needs tcp or shm to run at all");
    REQUIRE((tcp || shm));
}

TEST_CASE("select: the automatic choice explains itself", "[select]")
{
    Options o;
    o.node = test::test_address();
    const Selection s = select(o);
    const std::string r = s.report();
    CHECK_THAT(r, Catch::Contains("weft: provider ") && Catch::Contains("why:") &&
                      Catch::Contains("caps:") && Catch::Contains("progress:"));
    if (!s.rdma()) {
        CHECK(s.fell_back());
        CHECK_THAT(r, Catch::Contains("not verbs:") && Catch::Contains("FALLBACK"));
        CHECK_THAT(r, Catch::Contains("not shm: peers not known to share this host"));
    }
}

TEST_CASE("select: shm when the caller allows it", "[select]")
{
    if (test::unavailable({"shm", EndpointKind::rdm}))
        return;
    Options o;
    o.allow_shm = true;
    const Selection s = select(o);
    CHECK(s.provider() == "shm");
    CHECK(s.kind() == EndpointKind::rdm);
}

TEST_CASE("select: WEFT_PROVIDER and Options::provider override the order", "[select]")
{
    if (test::unavailable({"sockets", EndpointKind::msg}))
        return;
    EnvGuard env("WEFT_PROVIDER", "sockets");
    Selection s = select();
    CHECK(s.provider() == "sockets");
    CHECK_THAT(s.reason(), Catch::Contains("WEFT_PROVIDER=sockets"));
    Options o;
    o.provider = "tcp";
    s = select(o);
    CHECK(s.provider() == "tcp");
    CHECK_THAT(s.reason(), Catch::Contains("Options::provider"));
}

TEST_CASE("select: the same-host lane is on unless a provider is named, WEFT_SAME_HOST decides "
          "where Options left it automatic, and the report says which and why",
          "[select][lane]")
{
    if (test::unavailable({"tcp", EndpointKind::msg}))
        return;
    EnvGuard no_provider("WEFT_PROVIDER", nullptr);
    EnvGuard no_lane("WEFT_SAME_HOST", nullptr);
    Options o;
    REQUIRE(o.same_host == SameHost::automatic);
    {
        const Selection s = select(o); // nothing named: the lane
        CHECK(s.options().same_host == SameHost::lane);
        CHECK_THAT(s.report(),
                   Catch::Contains("same host: weft's lane (automatic: no provider was named)"));
    }
    o.provider = "tcp";
    {
        const Selection s = select(o); // named: what it names carries co-located peers too
        CHECK(s.options().same_host == SameHost::off);
        CHECK_THAT(s.report(), Catch::Contains("like any peer (automatic: Options::provider "
                                               "named the provider); SameHost::lane or "
                                               "WEFT_SAME_HOST=lane"));
    }
    {
        EnvGuard env("WEFT_SAME_HOST", "lane");
        const Selection s = select(o);
        CHECK(s.options().same_host == SameHost::lane);
        CHECK_THAT(s.report(), Catch::Contains("same host: weft's lane (WEFT_SAME_HOST=lane)"));
        Options asked = o;
        asked.same_host = SameHost::enforced; // the application's choice stands
        CHECK(select(asked).options().same_host == SameHost::enforced);
        CHECK_THAT(select(asked).report(), !Catch::Contains("WEFT_SAME_HOST"));
    }
    {
        EnvGuard env("WEFT_SAME_HOST", "off");
        Options any;
        CHECK(select(any).options().same_host == SameHost::off);
        CHECK_THAT(select(any).report(), Catch::Contains("like any peer (WEFT_SAME_HOST=off)"));
    }
    {
        EnvGuard env("WEFT_SAME_HOST", "yes");
        CHECK_THROWS_WITH(select(o), Catch::Contains("WEFT_SAME_HOST=yes") &&
                                         Catch::Contains("off, lane or enforced"));
    }
    Options off = o;
    off.same_host = SameHost::off;
    CHECK(select(off).options().same_host == SameHost::off);
}

TEST_CASE("select: FI_PROVIDER is respected and named", "[select]")
{
    // libfabric reads FI_PROVIDER once per process: ask a fresh one.
    const std::string out =
        test::run({{WEFT_CLI_PATH, "pingpong", "--max-size", "8", "--budget-ms", "10"},
                   {"FI_PROVIDER=sockets"}})
            .output;
    CHECK_THAT(out, Catch::Contains("weft: provider sockets") &&
                        Catch::Contains("FI_PROVIDER=sockets is set"));
    CHECK_THAT(out, Catch::Contains("bytes") && Catch::Contains("usec/xfer"));
}

TEST_CASE("select: with no address given, an interface whose address is link-local (a veth) is "
          "not chosen over one peers can reach",
          "[select][net]")
{
    // libfabric lists interfaces by link speed: a veth pair (10 Gb/s, only fe80:: addresses)
    // came first, and a group's Node bound to it was unreachable, then failed to open once
    // the pair went (a test making namespaces ran beside it).
    struct Pair {
        bool made = test::succeeds("ip link add wsel0 type veth peer name wsel1") &&
                    test::succeeds("ip link set wsel0 up") && test::succeeds("ip link set wsel1 up");
        ~Pair() { test::succeeds("ip link del wsel0"); }
    } pair;
    if (!pair.made) {
        WARN("SKIPPED: cannot make a veth pair here (needs root)");
        return;
    }
    // Its link-local addresses come once duplicate detection is done (~1 s).
    const auto listed = [] {
        return test::run_shell("ip -6 addr show dev wsel0 scope link").output.find("fe80") !=
               std::string::npos;
    };
    for (int i = 0; i < 50 && !listed(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(listed());
    Options o;
    o.provider = "tcp";
    const Selection s = select(o);
    const std::string domain = s.info()->domain_attr->name;
    INFO(s.report());
    CHECK(domain != "wsel0");
    CHECK(domain != "wsel1");
    // And a Node opens there.
    CHECK(Node::open(o)->address().encode().size() > 0);
}
