// SPDX-License-Identifier: MIT
// An awaiting server as a user runs one: a Node asleep in node.run(), counting
// notifications from 8 client processes' worth of Nodes, while strangers hold
// idle and garbage connections to its own listening port.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstring>
#include <set>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/sockets.hpp"
#include "support/threads.hpp"
#include "weft/async.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::soon;

namespace {

/// The TCP port a tcp MSG Node listens on, from its address (a sockaddr_in).
std::uint16_t listening_port(const Node& node)
{
    const auto bytes = node.address().fabric_address();
    sockaddr_in a{};
    REQUIRE(bytes.size() >= sizeof a);
    std::memcpy(&a, bytes.data(), sizeof a);
    REQUIRE(a.sin_family == AF_INET);
    return ntohs(a.sin_port);
}

} // namespace

TEST_CASE("async: a sleeping server counts 8 clients' notifications while strangers hold idle and "
          "garbage connections to its port",
          "[async][strangers]")
{
    constexpr std::size_t clients = 8;
    Options o;
    o.provider = "tcp";
    o.kind = EndpointKind::msg;
    o.node = "127.0.0.1";
    o.waiting = Waiting::sleep;
    auto server = Node::open(o);
    auto region = server->allocate(clients * 64, Access::remote_write);
    std::memset(region->data(), 0, region->size());

    // Strangers first: a port scanner's idle connections, an HTTP probe, and
    // bytes that look like nothing; they stay connected to the end.
    const std::uint16_t port = listening_port(*server);
    std::vector<test::Stranger> strangers;
    for (int i = 0; i < 24; ++i) {
        strangers.emplace_back(port);
        if (i % 3 == 1)
            strangers.back().say("GET / HTTP/1.0\r\n\r\n");
        else if (i % 3 == 2)
            strangers.back().say(std::string(300, '\x5a'));
    }

    std::vector<std::shared_ptr<Node>> nodes;
    std::vector<PeerId> ids;
    for (std::size_t i = 0; i < clients; ++i) {
        nodes.push_back(Node::open_like(o, server->address()));
        ids.push_back(server->add_peer(nodes.back()->address()));
    }
    const RemoteRegion where = region->remote();
    std::array<Completion, clients> got{};
    std::size_t n = 0;
    // The clients on threads of their own, the server on one more.
    test::on_threads(clients + 1, [&](std::size_t i) {
        if (i == clients) {
            auto count = [&]() -> Task<std::size_t> {
                co_return co_await server->notifications(ids, clients, Deadline::after(30s), got);
            };
            n = server->run(count(), Deadline::after(40s));
            return;
        }
        Node& me = *nodes[i];
        const PeerId to = me.add_peer(server->address());
        auto src = me.allocate(64, Access::local);
        std::memset(src->data(), static_cast<int>(0x10 + i), 64);
        me.connect(to, soon());
        int ctx = 0;
        me.write_notify(to, src->slice(0, 64), where, i * 64, static_cast<std::uint32_t>(i), &ctx);
        (void)me.wait(&ctx, soon());
    });

    REQUIRE(n == clients);
    std::set<std::uint32_t> values;
    for (const Completion& c : got) {
        values.insert(c.data);
        REQUIRE(c.peer == ids[c.data]); // named as the peer that wrote it
    }
    REQUIRE(values.size() == clients);
    for (std::size_t i = 0; i < clients; ++i)
        for (std::size_t b = 0; b < 64; ++b)
            REQUIRE(std::to_integer<int>(region->data()[i * 64 + b]) == static_cast<int>(0x10 + i));
}
