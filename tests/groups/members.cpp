// SPDX-License-Identifier: MIT
// Members: a service's members that come and go, as peers of one Node, on a
// local etcd this test starts. Every member is a Node of its own with an
// EtcdStore (a lease) of its own, driven by a thread of its own; the lesson's
// processes (a member killed, its lease expiring) are the TEST_CASE "service
// on etcd: ...".
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/etcd.hpp"
#include "support/skip.hpp"
#include "weft/groups/members.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// A store of its own (its own lease) under a prefix no other test case uses.
std::shared_ptr<EtcdStore> store_for(const std::string& prefix)
{
    return std::make_shared<EtcdStore>(test::Etcd::shared().endpoint(), soon(30s), prefix);
}

std::string fresh_prefix()
{
    static std::atomic<int> n{0};
    return fmt::format("members-{}-{}/", ::getpid(), n++);
}

/// The next change, within 20 s.
Members::Change next_change(Members& m)
{
    const auto c = m.next(soon(20s));
    REQUIRE(c);
    return *c;
}

} // namespace

TEST_CASE("members: each member that joins is a peer of every other and its notifications "
          "are named by it, one that leaves is removed from every Node at once",
          "[members][etcd][threads]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    WEFT_EACH_CELL(c);
    const Options o = test::options_for(c);
    const std::string prefix = fresh_prefix();
    auto service_store = store_for(prefix);
    auto service_node = Node::open(o);
    Members service(service_store, service_node, "m/", "service", soon(30s));
    auto inbox = service_node->allocate(4096, Access::remote_write);
    service_store->set("inbox", inbox->remote().encode());

    // Member "a" writes to the service; "b" stays until told to leave. Each
    // keeps its store (its lease) to the end: only leaving takes its key.
    std::atomic<bool> b_leave{false};
    std::string a_saw_b;
    const auto member = [&](const std::string& name, const std::atomic<bool>& done) {
        auto store = store_for(prefix);
        auto node = Node::open_like(o, service_node->address());
        Members me(store, node, "m/", name, soon(30s));
        const PeerId to_service = me.wait_for("service", soon(30s));
        if (name == "a") {
            const PeerId b = me.wait_for("b", soon(30s)); // members see each other too
            a_saw_b = *me.name_of(b);
            auto src = node->allocate(64, Access::local);
            int ctx = 0;
            // Written only once the service has seen this member join: before, its
            // notification could not be named (Members' contract).
            (void)store->get("admitted/a", soon(30s));
            const auto at = RemoteRegion::decode(store->get("inbox", soon(30s)));
            node->write_notify(to_service, src->slice(0, 64), at, 0, 7, &ctx);
            (void)node->wait(&ctx, soon(60s));
        }
        const Deadline until = soon(60s);
        while (!(name == "b" && b_leave) && !done && !until.expired())
            node->progress();
        me.leave();
        while (!done && !until.expired())
            node->progress();
    };
    test::Target a([&](const std::atomic<bool>& done) { member("a", done); });
    test::Target b([&](const std::atomic<bool>& done) { member("b", done); });
    std::map<std::string, PeerId> joined;
    for (int n = 0; n < 2; ++n) {
        const Members::Change ch = next_change(service);
        CHECK(ch.kind == Members::Change::Kind::joined);
        REQUIRE(service.name_of(ch.peer));
        CHECK(*service.name_of(ch.peer) == ch.name);
        joined[ch.name] = ch.peer;
        service_store->set("admitted/" + ch.name, std::string_view("yes"));
    }
    REQUIRE(joined.size() == 2);
    CHECK(joined.count("a") == 1);
    CHECK(joined["a"] != joined["b"]);
    CHECK(service.size() == 2);

    const Completion note = service_node->wait_for(Op::notify, soon(60s));
    CHECK(note.data == 7);
    CHECK(note.peer == joined["a"]);

    b_leave = true; // b's key is erased; its store, and its lease, live on
    const Members::Change left = next_change(service);
    CHECK(left.kind == Members::Change::Kind::left);
    CHECK(left.name == "b");
    CHECK(left.peer == joined["b"]);
    REQUIRE(service.name_of(left.peer)); // named until the next call of next()
    CHECK(*service.name_of(left.peer) == "b");
    CHECK_FALSE(service.find("b"));
    auto src = service_node->allocate(64, Access::local);
    int ctx = 0;
    CHECK_THROWS_AS(service_node->send(left.peer, src->slice(0, 8), &ctx), UsageError);
    CHECK_FALSE(service.next(Deadline::after(100ms)));
    CHECK(service.name_of(left.peer) == nullptr);
    CHECK(a.finish().empty());
    CHECK(b.finish().empty());
    CHECK(a_saw_b == "b");
}

TEST_CASE("members: a key that is no Node address is refused saying why, a name taken by "
          "another Node is a leave then a join, a name already there is refused, a member whose "
          "own key goes is told",
          "[members][etcd][bad-input]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    const std::string prefix = fresh_prefix();
    auto store = store_for(prefix);
    auto node = Node::open();
    Members service(store, node, "m/", "service", soon(30s));

    auto garbage = store_for(prefix);
    garbage->set_while_alive("m/garbage", std::string_view("not an address"));
    const Members::Change refused = next_change(service);
    CHECK(refused.kind == Members::Change::Kind::refused);
    CHECK(refused.name == "garbage");
    CHECK_FALSE(refused.peer);
    INFO(refused.why);
    CHECK(refused.why.find("m/garbage") != std::string::npos);
    CHECK(service.size() == 0);

    auto first = Node::open_like({}, node->address());
    auto a_store = store_for(prefix);
    auto a = std::make_unique<Members>(a_store, first, "m/", "a", soon(30s));
    const Members::Change joined = next_change(service);
    REQUIRE(joined.kind == Members::Change::Kind::joined);
    CHECK(joined.name == "a");

    // A second member called "a" while the first is alive.
    auto other_store = store_for(prefix);
    auto second = Node::open_like({}, node->address());
    CHECK_THROWS_AS(Members(other_store, second, "m/", "a", soon(30s)), UsageError);

    // "a" put again by another Node (a restart that took the name at once).
    a_store->set_while_alive("m/a", second->address().encode());
    const Members::Change gone = next_change(service);
    CHECK(gone.kind == Members::Change::Kind::left);
    CHECK(gone.peer == joined.peer);
    const Members::Change back = next_change(service);
    CHECK(back.kind == Members::Change::Kind::joined);
    CHECK(back.name == "a");
    CHECK(back.peer != joined.peer);
    CHECK(service.find("a") == back.peer);
    // The same address put again changes nothing.
    a_store->set_while_alive("m/a", second->address().encode());
    CHECK_FALSE(service.next(Deadline::after(300ms)));

    // This member's own key erased by another: it is told it is gone for the others.
    REQUIRE(garbage->erase("m/service"));
    const Members::Change self = next_change(service);
    CHECK(self.kind == Members::Change::Kind::left);
    CHECK(self.name == "service");
    CHECK_FALSE(self.peer);
    CHECK_FALSE(self.why.empty());
}

TEST_CASE("members: waiting for a member that never joins times out naming it",
          "[members][etcd][bad-input]")
{
    WEFT_SKIP_IF(test::Etcd::unavailable());
    auto store = store_for(fresh_prefix());
    Members alone(store, Node::open(), "m/", "alone", soon(30s));
    try {
        (void)alone.wait_for("nobody", Deadline::after(300ms));
        FAIL("wait_for returned");
    } catch (const TimeoutError& e) {
        INFO(e.what());
        CHECK(std::string(e.what()).find("\"nobody\"") != std::string::npos);
    }
}
