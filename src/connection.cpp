// SPDX-License-Identifier: MIT
// Two-party set-up over the side channel. The server chooses the provider and
// offers {kind, provider, fabric address, token}; the client selects the same
// provider for that address, connects (MSG, presenting the token as connection
// data) or sends its own address (RDM), and both confirm with `ready`.
#include "weft/connection.hpp"

#include <sys/random.h>

#include <array>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "../providers/traits.hpp"
#include "weft/error.hpp"
#include "offer.hpp"

namespace weft {
namespace {

std::array<std::byte, 16> make_token()
{
    std::array<std::byte, 16> t{};
    std::size_t got = 0;
    while (got < t.size()) {
        const ssize_t n = getrandom(t.data() + got, t.size() - got, 0);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else if (errno != EINTR)
            detail::throw_error("getrandom", -errno, "");
    }
    return t;
}

bool is_wildcard(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

} // namespace

Connection::Connection(std::shared_ptr<const Selection> selection, std::shared_ptr<Domain> domain,
                       std::shared_ptr<Endpoint> endpoint, Peer peer, SideChannel side)
    : selection_(std::move(selection)), domain_(std::move(domain)),
      endpoint_(std::move(endpoint)), peer_(peer), side_(std::move(side))
{
}

std::shared_ptr<MemoryRegion> Connection::register_memory(std::span<std::byte> memory,
                                                          Access access) const
{
    return MemoryRegion::register_memory(domain_, memory, access, endpoint_.get());
}

std::shared_ptr<MemoryRegion> Connection::allocate(std::size_t size, Access access) const
{
    return MemoryRegion::allocate(domain_, size, access, endpoint_.get());
}

RemoteRegion Connection::exchange(const RemoteRegion& mine, Deadline deadline)
{
    const auto wire = mine.encode();
    side_.send(Frame::region, wire, deadline);
    return RemoteRegion::decode(side_.receive(Frame::region, deadline));
}

void Connection::reconnect(Deadline deadline)
{
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
    side_.send(Frame::barrier, {}, deadline);
    (void)side_.receive(Frame::barrier, deadline);
}

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

Server::Server(const Options& options, std::string_view host, std::uint16_t port)
    : Server(options, SideListener(host, port))
{
}

Server::Server(const Options& options, SideListener listener)
    : side_(std::move(listener)), secret_(resolve_secret(options.secret))
{
    Options opts = options;
    if (opts.node.empty() && !is_wildcard(side_.host()))
        opts.node = side_.host(); // the fabric listens where the side channel does
    selection_ = std::make_shared<const Selection>(select(opts));
    fabric_ = Fabric::open(selection_->info());
    domain_ = Domain::open(fabric_, selection_->info());
    if (selection_->kind() == EndpointKind::msg)
        listener_ = Listener::open(fabric_, selection_->info());
    else
        rdm_ = Endpoint::open_rdm(domain_, selection_->options());
}

Connection Server::accept(Deadline deadline)
{
    SideChannel side = side_.accept(deadline, secret_);
    try {
        const auto token = make_token();
        const bool msg = selection_->kind() == EndpointKind::msg;
        // A peer that dies can wedge a shared RDM endpoint on some providers
        // (shm: its commands stay at the head of the queue, measured): there,
        // each connection gets an endpoint of its own.
        if (!msg && rdm_handed_out_ && domain_->quirks().dead_peer_blocks_endpoint)
            rdm_ = Endpoint::open_rdm(domain_, selection_->options());
        Offer offer{selection_->kind(), selection_->info()->addr_format,
                    std::string(selection_->provider()), std::string(selection_->info().fabric_name()),
                    {token.begin(), token.end()}, msg ? listener_->name() : rdm_->name(),
                    selection_->report()};
        side.send(Frame::offer, encode(offer), deadline);
        std::shared_ptr<Endpoint> ep;
        Peer peer;
        if (msg) {
            // Wait for the client's connection request in slices, so that a
            // client that failed (and said why on the side channel) is heard.
            std::optional<EventQueue::Event> request;
            while (!request) {
                try {
                    const auto slice = std::min(deadline.when(), Clock::now() + std::chrono::milliseconds(200));
                    request = listener_->wait_request(token, Deadline(slice));
                } catch (const TimeoutError&) {
                    if (deadline.expired())
                        throw;
                    if (side.readable())
                        (void)side.receive(Frame::ready, deadline); // raises the peer's error
                }
            }
            ep = Endpoint::accept(domain_, std::move(*request), selection_->options(), deadline);
            (void)side.receive(Frame::ready, deadline);
        } else {
            ep = rdm_;
            rdm_handed_out_ = true;
            peer = ep->insert_peer(side.receive(Frame::ready, deadline));
        }
        side.send(Frame::ready, {}, deadline);
        return Connection(selection_, domain_, std::move(ep), peer, std::move(side));
    } catch (const std::exception& e) {
        side.send_error(e.what());
        throw;
    }
}

} // namespace weft
