// SPDX-License-Identifier: MIT
// The server's side of the bootstrap (connection.cpp has the client's), for
// many clients at once. One poll loop, run by whichever thread is in accept(),
// moves every pending client a step when its socket or its fabric endpoint has
// something: hello -> (challenge -> proof) -> offer -> fabric connection ->
// `ready`. Every connection is a peer of the server's one Node (shm: a Node
// per connection, Quirks::dead_peer_blocks_endpoint): MSG clients connect to
// its listener presenting the offer's token, which the Node's gate admits;
// RDM clients are added when their `ready` brings their Node's address.
// Nothing in the loop blocks on one client, so a silent or garbage-speaking
// stranger costs the others nothing; each pending client has its own deadline.
#include "server_state.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "lanes.hpp"
#include "offer.hpp"
#include "random.hpp"
#include "side_wire.hpp"
#include "socket.hpp"
#include "weft/base/error.hpp"

namespace weft {

using detail::server::Pending;
using detail::server::Token;
using detail::server::max_pending;

namespace {

Token make_token()
{
    Token t{};
    detail::random_bytes(t, "a client's token");
    return t;
}

} // namespace

Server::State::State(const Options& options, SideListener listener_)
    : side(std::move(listener_)), secret(resolve_secret(options.secret))
{
    Options opts = options;
    if (opts.node.empty() && !detail::is_wildcard(side.host()))
        opts.node = side.host(); // the fabric listens where the side channel does
    selection = std::make_shared<const Selection>(select(opts));
    node = open_node();
}

std::shared_ptr<Node> Server::State::open_node()
{
    auto n = Node::open(selection);
    // Only clients this server offered a token to may connect to its Node.
    n->admit([this](std::uint64_t instance, std::span<const std::byte> token) {
        return admit(instance, token);
    });
    return n;
}

bool Server::State::admit(std::uint64_t instance, std::span<const std::byte> token)
{
    // Called by a Node while this server steps (the mutex is held).
    for (Pending& p : pending)
        if (p.step == Pending::Step::fabric && p.admitted == 0 && p.token.size() == token.size() &&
            std::equal(p.token.begin(), p.token.end(), token.begin())) {
            p.admitted = instance;
            return true;
        }
    return false; // a stale or forged token, or a Node not offered one
}

void Server::State::take_new_clients()
{
    const auto timeout = selection->options().handshake_timeout;
    while (pending.size() < max_pending) {
        auto c = detail::accept_waiting(side.fd());
        if (!c)
            return;
        pending.emplace_back(std::move(c->fd), std::move(c->peer), secret, Deadline::after(timeout));
    }
}

void Server::State::read_from(Pending& p)
{
    p.stream.receive(p.waiting_for(msg()));
    while (const auto frame = p.stream.next())
        on_frame(p, *frame);
}

void Server::State::on_frame(Pending& p, const detail::side::Received& frame)
{
    namespace side = detail::side;
    switch (p.step) {
    case Pending::Step::hello:
        if (p.hello.on_frame(p.stream, frame))
            send_offer(p);
        return;
    case Pending::Step::fabric:
        side::check_frame(frame.head, detail::Frame::ready, frame.payload, p.peer());
        if (p.ready_in)
            detail::side_fail(-EPROTO,
                              fmt::format("protocol error: {} sent its ready twice", p.peer()));
        p.client = NodeAddress::decode(frame.payload);
        if (p.shared_lane && !detail::lane_refusal(*p.client).empty())
            return offer_own_node(p);
        if (msg() && p.client->instance() != p.admitted)
            detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent the address of a Node "
                                                   "other than the one that connected with its "
                                                   "token",
                                                   p.peer()));
        p.ready_in = true;
        return;
    case Pending::Step::done:
        detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent frame type {} before the "
                                               "server's ready",
                                               p.peer(), frame.head.type));
    }
}

void Server::State::send_offer(Pending& p)
{
    p.token = make_token();
    // A peer that dies can wedge a shared RDM endpoint on some providers
    // (shm keeps its commands at the head of the queue): there, each
    // connection gets a Node of its own ("faults: a client killed mid-stream")
    // unless the same-host lane carries it. Clients on the lane put nothing in
    // the provider's queues, so they share one Node, and one registration
    // serves them all; one that turns out off the lane (its `ready`) is
    // offered a Node of its own then.
    const bool splits = node->domain()->quirks().dead_peer_blocks_endpoint;
    const SameHost lane = selection->options().same_host;
    if (splits && !msg() && (lane == SameHost::lane || lane == SameHost::enforced)) {
        p.shared_lane = true;
    } else if (node_handed_out && splits) {
        node = open_node();
    }
    node_handed_out = true;
    p.node = node;
    const Offer offer{{p.token.begin(), p.token.end()}, node->address(), selection->report()};
    p.stream.queue(detail::Frame::offer, encode(offer));
    p.step = Pending::Step::fabric;
}

void Server::State::offer_own_node(Pending& p)
{
    p.token = make_token();
    p.node = open_node();
    p.shared_lane = false;
    p.client.reset();
    const Offer offer{{p.token.begin(), p.token.end()}, p.node->address(), selection->report()};
    p.stream.queue(detail::Frame::ready, encode(offer)); // not ready: this Node instead
}

void Server::State::progress_nodes()
{
    // MSG connection requests arrive on a Node's listener: the Node admits
    // them through admit() and greets them while it progresses.
    const Node* last = nullptr;
    for (Pending& p : pending) {
        if (p.step != Pending::Step::fabric || p.node.get() == last)
            continue;
        last = p.node.get();
        if (const Node::Use use(*p.node, std::try_to_lock); use)
            p.node->progress();
    }
}

void Server::State::advance_fabric(Pending& p)
{
    if (!p.ready_in || p.fabric_up)
        return;
    // The Node is shared with the connections accept() handed out: when the
    // application is inside it in another thread, try again next step.
    {
        const Node::Use use(*p.node, std::try_to_lock);
        if (!use)
            return;
        if (!p.id)
            p.id = p.node->add_peer(*p.client);
        p.node->progress(); // MSG: the hellos
        p.fabric_up = p.node->connected(p.id);
        if (p.fabric_up)
            p.node->watch(p.id, p.stream.fd()); // a client that exits is lost at once
    }
    if (p.fabric_up) {
        p.stream.queue(detail::Frame::ready, {});
        p.step = Pending::Step::done;
    }
}

} // namespace weft
