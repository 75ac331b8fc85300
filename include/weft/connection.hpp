// SPDX-License-Identifier: MIT
/// @brief Two peers, one call each: a side channel for the bootstrap, a provider
/// both agree on, and a connected endpoint, for MSG and RDM alike.
///
///     // server                                  // client
///     weft::Server server(opts, "0.0.0.0", 7471);  auto c = weft::Connection::connect(
///     auto c = server.accept(deadline);                  "host:7471", opts, deadline);
///     auto mr = c.allocate(n, Access::remote_write);  auto peer_mr = c.exchange(my_mr->remote(), d);
///
/// The server chooses the provider (and says why); the client uses the same one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "weft/bootstrap.hpp"
#include "weft/deadline.hpp"
#include "weft/domain.hpp"
#include "weft/endpoint.hpp"
#include "weft/fabric.hpp"
#include "weft/listener.hpp"
#include "weft/memory_region.hpp"
#include "weft/remote_region.hpp"
#include "weft/select.hpp"

namespace weft {

/// A connected peer: the endpoint, the peer's address on it, and the side channel.
class Connection {
public:
    static Connection connect(std::string_view host_port, const Options& options,
                              Deadline deadline);

    Endpoint& endpoint() const noexcept { return *endpoint_; }
    const std::shared_ptr<Endpoint>& endpoint_ptr() const noexcept { return endpoint_; }
    Peer peer() const noexcept { return peer_; }
    const Selection& selection() const noexcept { return *selection_; }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    SideChannel& side() noexcept { return side_; }
    /// Client side: the server's Selection::report(), i.e. which provider it
    /// chose and why (empty on the server side).
    const std::string& peer_report() const noexcept { return peer_report_; }

    /// Registration on this connection's domain (bound to its endpoint when the
    /// provider wants FI_MR_ENDPOINT).
    std::shared_ptr<MemoryRegion> register_memory(std::span<std::byte> memory, Access access) const;
    std::shared_ptr<MemoryRegion> allocate(std::size_t size, Access access) const;

    /// Client side, after the server went away (a peer error, a closed side
    /// channel): runs the bootstrap again to the same host:port, retrying with
    /// backoff (Options::retry) until `deadline`, and replaces this connection.
    /// Only when the client opted in (RetryPolicy::reconnect); otherwise throws
    /// UsageError. The new connection has a new domain: register memory on it
    /// again and exchange the new RemoteRegions before resuming.
    void reconnect(Deadline deadline);
    /// How many times reconnect() succeeded.
    int reconnects() const noexcept { return reconnects_; }

    /// Sends `mine` and returns the peer's RemoteRegion (both sides call it).
    RemoteRegion exchange(const RemoteRegion& mine, Deadline deadline);
    /// Returns once both sides have called it.
    void barrier(Deadline deadline);

    // Data path with the peer bound (same as Endpoint's, Peer filled in).
    void write(Local src, const RemoteRegion& dst, std::uint64_t off, void* ctx) const
    {
        endpoint_->write(src, dst, off, ctx, peer_);
    }
    void read(Local dst, const RemoteRegion& src, std::uint64_t off, void* ctx) const
    {
        endpoint_->read(dst, src, off, ctx, peer_);
    }
    void write_notify(Local src, const RemoteRegion& dst, std::uint64_t off, std::uint32_t value,
                      void* ctx) const
    {
        endpoint_->write_notify(src, dst, off, value, ctx, peer_);
    }
    void send(Local src, void* ctx) const { endpoint_->send(src, ctx, peer_); }

    Connection(std::shared_ptr<const Selection> selection, std::shared_ptr<Domain> domain,
               std::shared_ptr<Endpoint> endpoint, Peer peer, SideChannel side);

private:
    std::shared_ptr<const Selection> selection_;
    std::shared_ptr<Domain> domain_;
    std::shared_ptr<Endpoint> endpoint_;
    Peer peer_;
    SideChannel side_;
    std::string peer_report_;
    std::string host_port_; // client side: where reconnect() goes
    std::optional<Options> options_;
    int reconnects_ = 0;
};

/// Accepts Connections: owns the side-channel listener, the selection, and the
/// fabric objects shared by its connections (the MSG listener, or the one RDM
/// endpoint all RDM peers share).
class Server {
public:
    /// Chooses the provider now (see selection().report()) and listens on
    /// host:port for side-channel connections (port 0 = any free port).
    Server(const Options& options, std::string_view host, std::uint16_t port);
    /// The same on a side-channel listener the caller already opened.
    Server(const Options& options, SideListener listener);

    std::uint16_t port() const noexcept { return side_.port(); }
    const Selection& selection() const noexcept { return *selection_; }

    /// Accepts the next client: bootstrap, fabric connection (MSG) or address
    /// exchange (RDM), until `deadline`.
    Connection accept(Deadline deadline);

private:
    std::shared_ptr<const Selection> selection_;
    SideListener side_;
    std::string secret_;
    std::shared_ptr<Fabric> fabric_;
    std::shared_ptr<Domain> domain_;
    std::shared_ptr<Listener> listener_;    // MSG
    std::shared_ptr<Endpoint> rdm_;         // RDM
    bool rdm_handed_out_ = false;           // RDM: rdm_ serves a connection already
};

} // namespace weft
