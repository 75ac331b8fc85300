// SPDX-License-Identifier: MIT
// Two-party set-up over the side channel. The server chooses the provider and
// offers {kind, provider, fabric address, token}; the client selects the same
// provider for that address, connects (MSG, presenting the token as connection
// data) or sends its own address (RDM), and both confirm with `ready`.
#include "weft/connection.hpp"

#include <array>
#include <cstdlib>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "../providers/traits.hpp"
#include "weft/error.hpp"
#include "offer.hpp"

namespace weft {
Connection::Connection(std::shared_ptr<const Selection> selection, std::shared_ptr<Domain> domain,
                       std::shared_ptr<Endpoint> endpoint, Peer peer, SideChannel side)
    : selection_(std::move(selection)), domain_(std::move(domain)),
      endpoint_(std::move(endpoint)), peer_(peer), side_(std::move(side))
{
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

std::shared_ptr<MemoryRegion> Connection::register_memory(std::span<std::byte> memory,
                                                          Access access) const
{
    const Endpoint& ep = live("Connection::register_memory");
    return MemoryRegion::register_memory(domain_, memory, access, &ep);
}

std::shared_ptr<MemoryRegion> Connection::allocate(std::size_t size, Access access) const
{
    const Endpoint& ep = live("Connection::allocate");
    return MemoryRegion::allocate(domain_, size, access, &ep);
}

RemoteRegion Connection::exchange(const RemoteRegion& mine, Deadline deadline)
{
    const auto wire = mine.encode();
    side_.send(Frame::region, wire, deadline);
    return RemoteRegion::decode(side_.receive(Frame::region, deadline));
}

void Connection::reconnect(Deadline deadline)
{
    (void)live("Connection::reconnect");
    if (!options_)
        throw UsageError("reconnect", -FI_EINVAL, std::string(selection_->provider()),
                         "only the client side of a connection reconnects; a server accepts the "
                         "client's new connection instead (Server::accept)");
    if (!options_->retry.reconnect)
        throw UsageError("reconnect", -FI_EINVAL, std::string(selection_->provider()),
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
    Endpoint& ep = live("Connection::barrier");
    if (!flush_mr_) {
        flush_mr_ = allocate(1, Access::remote_read);
        peer_flush_ = exchange(flush_mr_->remote(), deadline);
    }
    ep.flush(peer_flush_, peer_, deadline);
    side_.send(Frame::barrier, {}, deadline);
    // The peer's own flush reads from this side: keep progressing until its
    // barrier frame arrives (a provider that needs target progress would
    // otherwise stall it when this side runs no progress thread).
    while (!side_.readable(std::chrono::milliseconds(1))) {
        ep.progress();
        if (deadline.expired())
            break; // receive() below reports the timeout
    }
    (void)side_.receive(Frame::barrier, deadline);
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
        detail::log_warning(fmt::format("this side allows shared memory (Options::allow_shm, "
                                        "--shm), but the server chose {}: the server decides; "
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
    const auto [host, port] = split_host_port(host_port);
    SideChannel side =
        SideChannel::connect(host, port, deadline, resolve_secret(options.secret), options.retry);
    try {
        const Offer offer = decode_offer(side.receive(Frame::offer, deadline));
        if (!options.provider.empty() &&
            providers::parse_request(options.provider, &offer.kind).path != offer.provider)
            throw UsageError("connect", -FI_EINVAL, offer.provider,
                             fmt::format("the server chose {} but this side asked for {}: choose "
                                         "the provider on the server",
                                         offer.provider, options.provider));
        note_server_choice(options, offer.provider, offer.kind);
        Options opts = options;
        opts.kind = offer.kind;
        if (opts.node.empty())
            opts.node = side.local_address(); // the interface that reaches the server
        auto selection = std::make_shared<const Selection>(
            select_for_peer(opts, offer.provider, offer.kind, offer.addr_format,
                            offer.address.data(), offer.address.size()));
        auto fabric = Fabric::open(selection->info());
        auto domain = Domain::open(fabric, selection->info());
        std::shared_ptr<Endpoint> ep;
        Peer peer;
        if (offer.kind == EndpointKind::msg) {
            ep = Endpoint::connect(domain, selection->info(), opts, offer.token, deadline);
            side.send(Frame::ready, {}, deadline);
        } else {
            ep = Endpoint::open_rdm(domain, opts);
            peer = ep->insert_peer(offer.address);
            side.send(Frame::ready, ep->name(), deadline);
        }
        (void)side.receive(Frame::ready, deadline);
        Connection c(std::move(selection), std::move(domain), std::move(ep), peer,
                     std::move(side));
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
