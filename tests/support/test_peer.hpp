// SPDX-License-Identifier: MIT
// weft-test-peer (programs/test_peer.cpp) from a test: its arguments for a
// cell, Options that fit its receive slots, and the two ways a test starts it:
// as a server ("PORT n") to connect to, or as a client that streams writes
// into a server's connection ("STREAMING"). A test that uses it is built with
// WEFT_TEST_PEER_PATH (tests/CMakeLists.txt: weft_uses_test_peer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/peer_process.hpp"

namespace weft::test {

/// weft-test-peer's arguments for cell `c`, then `more` (a fixed port, or
/// "--stream HOST:PORT").
inline std::vector<std::string> test_peer_args(const Case& c, std::vector<std::string> more = {})
{
    std::vector<std::string> args{c.provider, c.kind == EndpointKind::msg ? "msg" : "rdm",
                                  test_address()};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

/// `base` with weft-test-peer's receive slots: 4, of 4 MiB + 64 B.
inline Options test_peer_options(Options base = {})
{
    base.slot_size = (4u << 20) + 64;
    base.rx_slots = 4;
    return base;
}

#ifdef WEFT_TEST_PEER_PATH
/// weft-test-peer serving cell `c` (on `port`, or one of its own), once it
/// has said its port.
inline PeerProcess test_peer_server(const Case& c, std::uint16_t port = 0)
{
    return PeerProcess(WEFT_TEST_PEER_PATH,
                       test_peer_args(c, port ? std::vector{std::to_string(port)}
                                              : std::vector<std::string>{}));
}

/// A connection to weft-test-peer server `peer`.
inline Connection connect_to(const PeerProcess& peer, const Options& o = test_peer_options())
{
    return Connection::connect(at(peer.port()), o, soon());
}

/// Starts weft-test-peer in `client` as a client of `server` (cell `c`) that
/// streams writes into the `size` bytes the connection it makes exposes (kept
/// in `exposed`: they outlive the connection). The server's end, once the
/// client says it streams.
inline Connection accept_streaming(Server& server, const Case& c, std::optional<PeerProcess>& client,
                                   std::vector<std::shared_ptr<MemoryRegion>>& exposed,
                                   std::size_t size, Access access)
{
    PeerLauncher start(client, WEFT_TEST_PEER_PATH,
                       test_peer_args(c, {"--stream", at(server.port())}));
    Connection conn = server.accept(soon(std::chrono::seconds(60)));
    auto target = exposed.emplace_back(conn.allocate(size, access));
    (void)conn.exchange(target->remote(), soon());
    start.join();
    REQUIRE(client->first_line().rfind("STREAMING", 0) == 0);
    return conn;
}
#endif

} // namespace weft::test
