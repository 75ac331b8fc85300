// SPDX-License-Identifier: MIT
// A peer killed mid-transfer: every waiter of it resumes with peer_lost()
// before its deadline, its transfer fails naming its entry, and the other
// peers' transfers complete, every byte there.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <sstream>

#include "async/support.hpp"
#include "support/hex.hpp"
#include "support/peer_process.hpp"

using namespace weft;
using weft::test::hex;
using weft::test::unhex;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// A listening loopback socket: the targets' side channels connect to it.
struct SidePort {
    detail::Fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    std::uint16_t port = 0;
    SidePort()
    {
        sockaddr_in at{};
        at.sin_family = AF_INET;
        at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof at;
        REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
        REQUIRE(::listen(fd.get(), 16) == 0);
        REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&at), &len) == 0);
        port = ntohs(at.sin_port);
    }
    detail::Fd accept_one() { return detail::Fd(::accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC)); }
};

} // namespace

TEST_CASE("async: a peer killed mid-transfer resumes its waiters with peer_lost, the others' "
          "transfers complete",
          "[async][faults][process]")
{
    const test::Case c = GENERATE(test::Case{"tcp", EndpointKind::msg},
                                  test::Case{"tcp;ofi_rxm", EndpointKind::rdm});
    // Not shm: a peer killed mid-stream stalls the endpoint it shared with the
    // others (Quirks::dead_peer_blocks_endpoint), so theirs cannot complete there.
    WEFT_REQUIRE_CELL(c);
    INFO(c.label());
    constexpr std::size_t big = 8u << 20;
    auto hub = Node::open(test::options_for(c));
    SidePort side;
    std::vector<std::unique_ptr<test::PeerProcess>> procs;
    std::vector<PeerId> ids;
    std::vector<RemoteRegion> regions;
    std::vector<detail::Fd> sides;
    for (int i = 0; i < 3; ++i) {
        procs.push_back(std::make_unique<test::PeerProcess>(
            WEFT_TEST_ASYNC_TARGET,
            std::vector<std::string>{c.provider, c.kind == EndpointKind::msg ? "msg" : "rdm",
                                     test::test_address(), hex(hub->address().encode()),
                                     std::to_string(side.port), std::to_string(big)}));
        std::istringstream line(procs.back()->first_line());
        std::string ready, address, region;
        line >> ready >> address >> region;
        REQUIRE(ready == "READY");
        ids.push_back(hub->add_peer(NodeAddress::decode(unhex(address))));
        regions.push_back(RemoteRegion::decode(unhex(region)));
        sides.push_back(side.accept_one());
        REQUIRE(sides.back());
        hub->watch(ids.back(), sides.back().get());
    }
    hub->connect(ids, soon());
    auto src = hub->allocate(big, Access::local);
    std::memset(src->data(), 0x3c, big);
    std::vector<Transfer> transfers;
    for (int i = 0; i < 3; ++i) {
        std::vector<TransferEntry> entries;
        for (std::size_t off = 0; off < big; off += 1u << 20)
            entries.push_back({ids[i], src->slice(off, 1u << 20), regions[i], off});
        transfers.push_back(Transfer::prepare(hub, Direction::write, entries, Notify{.enabled = true}));
    }
    // A waiter on the peer that dies, for what it will never send.
    auto never = [](Node& n, PeerId p) -> Task<int> {
        try {
            (void)co_await n.notification(p, Deadline::after(60s));
            co_return 0;
        } catch (const Error& e) {
            co_return e.peer_lost() ? 1 : 2;
        }
    }(*hub, ids[1]);
    never.start();
    for (auto& t : transfers)
        t.post();
    procs[1]->kill_now();
    const auto killed = Clock::now();
    auto awaiting = [](Transfer& t) -> Task<int> {
        try {
            co_await t.done(Deadline::after(60s));
            co_return 0;
        } catch (const Error& e) {
            co_return e.peer_lost() ? 1 : 2;
        }
    };
    std::vector<Task<int>> waits;
    for (auto& t : transfers)
        waits.push_back(awaiting(t));
    for (auto& w : waits)
        w.start();
    const Deadline limit = Deadline::after(30s);
    while (!never.done() || !waits[0].done() || !waits[1].done() || !waits[2].done()) {
        hub->dispatch();
        REQUIRE_FALSE(limit.expired());
    }
    CHECK(Clock::now() - killed < 10s); // told at once, not at a deadline
    CHECK(never.result() == 1);
    CHECK(waits[1].result() == 1);
    const auto st = transfers[1].status();
    CHECK(st.state == Transfer::State::failed);
    CHECK(st.failed_entry < transfers[1].size());
    CHECK(waits[0].result() == 0);
    CHECK(waits[2].result() == 0);
    CHECK(hub->is_lost(ids[1]));
    CHECK_FALSE(hub->is_lost(ids[0]));
    // The others' bytes are there: read back.
    auto back = hub->allocate(big, Access::local);
    for (int i : {0, 2}) {
        std::memset(back->data(), 0, big);
        std::vector<TransferEntry> entries;
        for (std::size_t off = 0; off < big; off += 1u << 20)
            entries.push_back({ids[i], back->slice(off, 1u << 20), regions[i], off});
        auto r = Transfer::prepare(hub, Direction::read, entries);
        r.post();
        r.wait(soon());
        for (std::size_t off = 0; off < big; off += 4096)
            REQUIRE(back->data()[off] == std::byte{0x3c});
    }
}
