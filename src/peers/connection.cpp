// SPDX-License-Identifier: MIT
// Two-party set-up over the side channel. The server chooses the provider and
// offers {token, its Node's address}; the client opens a Node on the same
// provider for that address, adds the server's Node as a peer and connects to
// it (MSG, presenting the token), sends its own Node's address in `ready`, and
// the server confirms with `ready` once it has the client as a peer.
#include "weft/peers/connection.hpp"
#include "check.hpp"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "side_wire.hpp"
#include "socket.hpp"
#include "traits.hpp"
#include "weft/base/error.hpp"
#include "offer.hpp"

namespace weft {
Connection::Connection(std::shared_ptr<Node> node, PeerId peer, SideChannel side)
    : node_(std::move(node)), peer_id_(peer), side_(std::move(side))
{
}

Connection::~Connection() { end(); }

Connection& Connection::operator=(Connection&& other) noexcept
{
    if (this != &other) {
        end();
        node_ = std::move(other.node_);
        peer_id_ = other.peer_id_;
        side_ = std::move(other.side_);
        peer_report_ = std::move(other.peer_report_);
        host_port_ = std::move(other.host_port_);
        flush_mr_ = std::move(other.flush_mr_);
        peer_flush_ = other.peer_flush_;
        options_ = std::move(other.options_);
        reconnects_ = other.reconnects_;
    }
    return *this;
}

void Connection::end() noexcept
{
    if (!node_)
        return;
    // The region first: it may be bound to the peer's endpoint (FI_MR_ENDPOINT).
    flush_mr_.reset();
    node_->retire_peer(peer_id_);
    node_.reset();
}

void Connection::explain(const Error& e) const
{
    if (e.peer_lost() || dynamic_cast<const UsageError*>(&e))
        throw;
    // A peer that exits or is killed closes its side channel with its fabric
    // connection; give that a moment to show before judging.
    if (side_.peer_closed(std::chrono::milliseconds(200)))
        throw Error(e.call(), e.code() ? e.code() : -FI_ECONNRESET, e.provider(),
                    fmt::format("the peer {} is gone: its side channel closed (it exited, was "
                                "killed, or closed its Connection). What failed: {}",
                                side_.peer(), e.what()),
                    e.context(), true);
    const int code = e.code();
    // tcp refuses an access by closing the connection: what this side last
    // wrote to the peer is what was refused (Node::take_refusal).
    if (code == -FI_ECANCELED || code == -FI_ENOTCONN || code == -FI_ECONNRESET || code == -EPIPE)
        if (std::string refusal = node_->take_refusal(peer_id_); !refusal.empty())
            throw Error(e.call(), -FI_EACCES, e.provider(),
                        fmt::format("{}. What failed now: {}", refusal, e.what()), e.context());
    // verbs reports a refused access as -EIO ("remote access error").
    if (code == -FI_ECANCELED || code == -FI_ENOTCONN || code == -FI_ECONNRESET ||
        code == -FI_ECONNABORTED || code == -EPIPE || code == -FI_EIO)
        throw Error(e.call(), code, e.provider(),
                    fmt::format("{}. The peer {} is still there (its side channel is open): it "
                                "most likely refused this access (wrong key, out of bounds, or "
                                "without the access) and dropped the fabric connection, as {} "
                                "does then; check the RemoteRegion",
                                e.what(), side_.peer(), e.provider()),
                    e.context());
    throw;
}

void Connection::moved_from(const char* call)
{
    throw UsageError(call, -FI_EINVAL, "",
                     "this Connection was moved from: use the Connection it was moved to");
}


RemoteRegion Connection::exchange(const RemoteRegion& mine, Deadline deadline)
{
    const auto wire = mine.encode();
    side_.send(detail::Frame::region, wire, deadline);
    return RemoteRegion::decode(side_.receive(detail::Frame::region, deadline));
}

void Connection::reconnect(Deadline deadline)
{
    const std::string provider(live("Connection::reconnect").provider());
    if (!options_)
        throw UsageError("reconnect", -FI_EINVAL, provider,
                         "only the client side of a connection reconnects; a server accepts the "
                         "client's new connection instead (Server::accept)");
    if (!options_->retry.reconnect)
        throw UsageError("reconnect", -FI_EINVAL, provider,
                         fmt::format("this connection to {} did not opt in to reconnecting: set "
                                     "Options::retry.reconnect = true (and a backoff) to allow it",
                                     host_port_));
    Connection fresh = connect(host_port_, *options_, deadline);
    const int count = reconnects_ + 1;
    *this = std::move(fresh);
    reconnects_ = count;
}

void Connection::barrier(Deadline deadline)
{
    Node& node = live("Connection::barrier");
    if (!flush_mr_) {
        flush_mr_ = allocate(1, Access::remote_read);
        peer_flush_ = exchange(flush_mr_->remote(), deadline);
    }
    {
        const Node::Use use(node, "Connection::barrier");
        node.endpoint(peer_id_).flush(peer_flush_, node.fabric_peer(peer_id_), deadline);
    }
    side_.send(detail::Frame::barrier, {}, deadline);
    // The peer's own flush reads from this side: keep progressing until its
    // barrier frame arrives (a provider that needs target progress would
    // otherwise stall it when this side runs no progress thread).
    // receive() below reports a timeout.
    (void)side_.readable_while([&] { node.progress(); }, deadline, std::chrono::milliseconds(1));
    (void)side_.receive(detail::Frame::barrier, deadline);
}

namespace {

/// The server chooses the provider: say so when this side wished otherwise
/// (a mismatch with Options::provider itself is an error, above).
void note_server_choice(const Options& options, std::string_view chosen, EndpointKind kind)
{
    const char* env = std::getenv("WEFT_PROVIDER");
    if (options.provider.empty() && env && *env &&
        providers::parse_request(env, &kind).path != chosen)
        detail::log_warning(fmt::format("WEFT_PROVIDER={} on this side is not used: the server "
                                        "chose {} (the server decides; set WEFT_PROVIDER there)",
                                        env, chosen));
    if (options.allow_shm && !providers::traits_for(chosen).same_host_only)
        detail::log_warning(fmt::format("this side allows shared memory (Options::allow_shm), "
                                        "but the server chose {}: the server decides; "
                                        "allow shm there when both run on one host",
                                        chosen));
    if (options.kind && *options.kind != kind)
        detail::log_warning(fmt::format("this side asked for {} endpoints, but the server chose "
                                        "{} ({}): the server decides",
                                        to_string(*options.kind), to_string(kind), chosen));
}

} // namespace

Connection Connection::connect(std::string_view host_port, const Options& options,
                               Deadline deadline)
{
    return connect(host_port, options, deadline, nullptr);
}

Connection Connection::connect(std::string_view host_port, const Options& options,
                               Deadline deadline, std::shared_ptr<Node> via)
{
    const auto [host, port] = split_host_port(host_port);
    SideChannel side =
        SideChannel::connect(host, port, deadline, resolve_secret(options.secret), options.retry);
    try {
        const Offer offer = decode_offer(side.receive(detail::Frame::offer, deadline));
        const NodeAddress& server = offer.node;
        const EndpointKind kind = server.kind();
        if (!options.provider.empty() &&
            providers::parse_request(options.provider, &kind).path != server.provider())
            throw UsageError("connect", -FI_EINVAL, server.provider(),
                             fmt::format("the server chose {} but this side asked for {}: choose "
                                         "the provider on the server",
                                         server.provider(), options.provider));
        std::shared_ptr<Node> node = std::move(via);
        if (node && (node->provider() != server.provider() || node->kind() != server.kind()))
            throw UsageError("connect", -FI_EINVAL, server.provider(),
                             fmt::format("the server at {} chose {} ({}), but the Node given to "
                                         "reach it runs {} ({}): a Node reaches servers of its own "
                                         "provider and endpoint kind; connect without a Node, or "
                                         "have the servers choose {}",
                                         host_port, server.provider(), to_string(server.kind()),
                                         node->provider(), to_string(node->kind()),
                                         node->provider()));
        if (!node) {
            note_server_choice(options, server.provider(), server.kind());
            Options opts = options;
            opts.kind = server.kind();
            if (opts.node.empty())
                opts.node = side.local_address(); // the interface that reaches the server
            node = Node::open(std::make_shared<const Selection>(select_for_peer(
                opts, server.provider(), server.kind(), server.addr_format(),
                server.fabric_address().data(), server.fabric_address().size())));
        }
        PeerId peer = node->add_peer(server, offer.token);
        // A Node shared with other connections keeps them if this one fails.
        struct Undo {
            Node& node;
            PeerId peer;
            bool armed = true;
            ~Undo()
            {
                if (armed)
                    node.retire_peer(peer);
            }
        } undo{*node, peer};
        // The server's answer to `ready` is empty, or (a Node its co-located
        // clients on the same-host lane share, and this side is off that lane)
        // the offer of a Node of this client's own: then once more with that.
        for (int offers = 1;; ++offers) {
            node->connect(peer, deadline); // MSG: admitted with the token; RDM: nothing to do
            side.send(detail::Frame::ready, node->address().encode(), deadline);
            // The server adds this side as a peer before it answers; the wait
            // drives this Node, so the server's hello (MSG) is taken meanwhile.
            (void)side.readable_while([&] { node->progress(); }, deadline,
                                      std::chrono::milliseconds(1));
            const auto answer = side.receive(detail::Frame::ready, deadline);
            if (answer.empty())
                break;
            const Offer own = decode_offer(answer);
            if (offers > 1 || own.node.provider() != server.provider() ||
                own.node.kind() != server.kind())
                throw Error("connect", -EPROTO, server.provider(),
                            fmt::format("protocol error: the server at {} answered this side's "
                                        "ready with a second offer it cannot take (a third, or "
                                        "another provider's)",
                                        host_port));
            const PeerId first = std::exchange(peer, node->add_peer(own.node, own.token));
            undo.peer = peer;
            node->retire_peer(first);
        }
        node->watch(peer, side.fd()); // a server that exits is lost at once
        undo.armed = false;
        Connection c(std::move(node), peer, std::move(side));
        c.peer_report_ = offer.report;
        c.host_port_ = std::string(host_port);
        c.options_ = options;
        return c;
    } catch (const std::exception& e) {
        side.send_error(e.what());
        throw;
    }
}

} // namespace weft
