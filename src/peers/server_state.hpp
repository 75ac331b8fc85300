// SPDX-License-Identifier: MIT
// The state of a Server (server.cpp: the bootstrap steps of one client;
// server_loop.cpp: the poll loop over all of them and the public calls).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "side_stream.hpp"
#include "weft/peers/connection.hpp"

namespace weft::detail::server {

using Token = std::array<std::byte, 16>;

/// Most clients in their bootstrap at once; more wait in the listen backlog.
constexpr std::size_t max_pending = 512;
/// How many rejection reasons Server::rejections() keeps.
constexpr std::size_t kept_reasons = 16;

/// One client between its TCP connect and a connected endpoint.
struct Pending {
    enum class Step : std::uint8_t { hello, fabric, done };

    detail::side::Stream stream;
    detail::side::AcceptorHello hello;
    Deadline deadline;
    Step step = Step::hello;
    Token token{};
    std::shared_ptr<Node> node;       // the Node this client joins
    std::uint64_t admitted = 0;       // MSG: the instance the gate let in with our token
    std::optional<NodeAddress> client; // from its `ready`
    PeerId id;                        // the client on `node`, once added
    bool fabric_up = false;           // connected and greeted (MSG), added (RDM)
    bool ready_in = false;            // the client's `ready` arrived
    bool shared_lane = false;         // `node` is the one co-located clients on the lane share

    Pending(detail::Fd fd, std::string peer, std::string_view secret, Deadline deadline_)
        : stream(std::move(fd), std::move(peer)), hello(secret), deadline(deadline_)
    {
        hello.start(stream);
    }
    const std::string& peer() const noexcept { return stream.peer(); }
    /// What the server waits for from this client (`msg`: MSG endpoints),
    /// for the error that ends it.
    const char* waiting_for(bool msg) const
    {
        switch (step) {
        case Step::hello: return hello.waiting_for();
        case Step::fabric:
            if (ready_in)
                return "its fabric connection to complete";
            if (!msg)
                return "its ready (with its Node's address)";
            return admitted == 0 ? "its fabric connection: no connection request presenting its "
                                   "token arrived at the server's Node"
                                 : "its ready: its connection request arrived and was accepted, "
                                   "but the connection or its hellos did not complete";
        case Step::done: return "the last frame to be sent";
        }
        return "?";
    }
};

} // namespace weft::detail::server

namespace weft {

struct Server::State {
    std::shared_ptr<const Selection> selection;
    SideListener side;
    std::string secret;
    std::shared_ptr<Node> node;  // the connections' Node
    bool node_handed_out = false; // `node` serves a client already

    mutable std::mutex mutex; // everything below, and the calls that use the above
    std::list<detail::server::Pending> pending;
    std::deque<Connection> ready;
    Rejections rejected;

    State(const Options& options, SideListener listener_);
    bool msg() const { return selection->kind() == EndpointKind::msg; }
    void step(Clock::duration wait);
    /// The first client whose bootstrap completed, if one has (the mutex held).
    std::optional<Connection> take_ready()
    {
        if (ready.empty())
            return std::nullopt;
        Connection c = std::move(ready.front());
        ready.pop_front();
        return c;
    }
    void take_new_clients();
    void read_from(detail::server::Pending& p);
    void on_frame(detail::server::Pending& p, const detail::side::Received& frame);
    std::shared_ptr<Node> open_node();
    bool admit(std::uint64_t instance, std::span<const std::byte> token);
    void send_offer(detail::server::Pending& p);
    /// The client's `ready` showed it off the lane of a Node that only clients
    /// on the lane share: the offer of a Node of its own, in the answer.
    void offer_own_node(detail::server::Pending& p);
    void advance_fabric(detail::server::Pending& p);
    void progress_nodes();
    void finish(std::list<detail::server::Pending>::iterator it);
    void reject(std::list<detail::server::Pending>::iterator it, const std::string& why);
    std::string rejection_summary() const;
};


} // namespace weft
