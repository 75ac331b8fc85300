// SPDX-License-Identifier: MIT
// A peer that leaves is reported as lost (Error::peer_lost), distinct from a
// peer that refuses an access and stays; both on every provider cell.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <thread>

#include "support/cases.hpp"
#include "support/eventually.hpp"
#include "support/test_peer.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// Runs one RMA (read or write) through the Connection and returns its error.
std::optional<Error> attempt(Connection& c, const Local& l, const RemoteRegion& r, bool read)
{
    int ctx = 0;
    try {
        if (read)
            c.read(l, r, 0, &ctx);
        else
            c.write(l, r, 0, &ctx);
        (void)c.wait(&ctx, Deadline::after(20s));
    } catch (const Error& e) {
        return e;
    }
    return std::nullopt;
}

} // namespace

TEST_CASE("peer lost: a peer that leaves is reported as lost", "[faults][peer-lost][process]")
{
    // The peer is a process of its own: on shm a peer endpoint closed in the
    // same process takes the shared mapping of its queue with it, and the next
    // post crashes inside libfabric 1.17 (the peer's lock is gone).
    WEFT_EACH_CELL(c);
    const bool read = GENERATE(false, true);
    INFO((read ? "read" : "write"));
    auto peer = test::test_peer_server(c);
    std::vector<std::shared_ptr<MemoryRegion>> held; // outlive the connection
    Connection conn = test::connect_to(peer);
    auto local = held.emplace_back(conn.allocate(1 << 16, Access::remote_write));
    const RemoteRegion remote = conn.exchange(local->remote(), soon());
    REQUIRE_FALSE(attempt(conn, local->slice(0, 4096), remote, read));
    const std::array<std::byte, 1> quit{std::byte{'Q'}}; // the peer returns from main
    conn.side().send(detail::Frame::data, quit, soon());
    REQUIRE(conn.side().peer_closed(20000ms)); // it has left
    // An operation may still complete locally (a write handed to the socket
    // before the connection's end was seen); within a few, one fails.
    std::optional<Error> e;
    auto failed_after = Clock::duration::zero();
    for (int i = 0; i < 50 && !e; ++i) {
        const auto start = Clock::now();
        e = attempt(conn, local->slice(0, 4096), remote, read);
        failed_after = Clock::now() - start;
        std::this_thread::sleep_for(10ms);
    }
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->peer_lost());
    CHECK_THAT(e->what(), Catch::Contains("is gone"));
    // Said at once, not after the 10 s a post retries a full queue: the
    // Node watches the side channel while it retries (Endpoint::GoneCheck).
    CHECK(failed_after < 5s);
}

TEST_CASE("peer lost: a refused access leaves the peer there, and says so", "[faults][peer-lost]")
{
    WEFT_EACH_CELL(c);
    auto p = test::connect_pair(c);
    auto target = p.expose(1 << 16, Access::remote_read_write);
    auto local = p.client.allocate(1 << 16, Access::local);
    if (p.client.endpoint().quirks().keys_unchecked || p.client.endpoint().quirks().remote_errors_silent) {
        WARN(c.label() << ": this provider does not refuse a wrong key (Quirks), nothing to tell apart");
        return;
    }
    const RemoteRegion r = target->remote();
    const RemoteRegion forged(r.base(), r.length(), r.key() ^ 0x5a5a5a, r.flags());
    // A read: some providers complete a refused write locally and only then
    // drop the connection.
    const auto e = attempt(p.client, local->slice(0, 4096), forged, true);
    REQUIRE(e);
    INFO(e->what());
    CHECK_FALSE(e->peer_lost());
    CHECK_THAT(e->what(), Catch::Contains("RemoteRegion"));
}

TEST_CASE("peer lost: of three clients streaming into one server, the one killed is lost within "
          "seconds and the others stream on",
          "[faults][peer-lost][process]")
{
    WEFT_EACH_CELL(c);
    std::vector<std::shared_ptr<MemoryRegion>> inbox; // outlive the connections
    Server server(test::options_for(c, test::test_peer_options()), test::test_address(), 0);
    std::vector<std::optional<test::PeerProcess>> clients(3);
    std::vector<Connection> ends;
    for (auto& client : clients)
        ends.push_back(
            test::accept_streaming(server, c, client, inbox, 1u << 20, Access::remote_write));
    // The Nodes the ends are peers of (one, or one each where the provider
    // has a Server give every connection its own).
    auto progress_all = [&] {
        const Node* last = nullptr;
        for (auto& e : ends)
            if (&e.node() != last) {
                last = &e.node();
                e.node().progress();
            }
    };
    // New data lands in end j's region while the others' Nodes progress too.
    auto streams = [&](std::size_t j) {
        std::memset(inbox[j]->data(), 0, inbox[j]->size());
        return test::eventually(
            Deadline::after(20s),
            [&] { return !test::all_equal(inbox[j]->data(), inbox[j]->size(), std::byte{0}); },
            progress_all);
    };
    for (std::size_t j = 0; j < ends.size(); ++j)
        REQUIRE(streams(j));
    clients[1]->kill_now();
    const auto killed = Clock::now();
    const PeerId gone = ends[1].peer_id();
    REQUIRE(test::eventually(
        Deadline(killed + 5s), [&] { return ends[1].node().is_lost(gone); }, progress_all));
    const auto lost = ends[1].node().lost();
    CHECK(std::find(lost.begin(), lost.end(), gone) != lost.end());
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
    WARN(c.label() << ": lost " << ms << " ms after the kill");
    for (const std::size_t j : {0u, 2u}) {
        INFO("end " << j);
        CHECK(streams(j));
        CHECK_FALSE(ends[j].node().is_lost(ends[j].peer_id()));
    }
    // Posting to the lost client is refused before any traffic, as peer_lost.
    auto src = ends[1].allocate(64, Access::local);
    int ctx = 0;
    try {
        ends[1].write(src->slice(0, 64), inbox[1]->remote(), 0, &ctx);
        FAIL("a write to a lost peer was posted");
    } catch (const Error& e) {
        CHECK(e.peer_lost());
        CHECK_THAT(e.what(), Catch::Contains("is gone"));
    }
}
