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
#include <vector>

#include "weft/bootstrap/bootstrap.hpp"
#include "weft/base/deadline.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/fabric/fabric.hpp"
#include "weft/fabric/listener.hpp"
#include "weft/fabric/memory_region.hpp"
#include "weft/peers/node.hpp"
#include "weft/fabric/remote_region.hpp"
#include "weft/select/select.hpp"

namespace weft {

/// A connected peer: a peer of a Node, and the side channel to it.
///
/// A client's Connection has a Node of its own unless it is given one (several
/// servers through one Node); a Server's Connections share
/// the Server's Node (one domain, one completion queue, one RDM endpoint or
/// MSG listener for every client), so a completion is the peer's own: wait_for
/// hands out this peer's notifications and messages, and keeps the others'
/// for their Connections. Destroying a Connection ends that peer only.
///
/// Threading: the Connections of one Server share its Node, which is used by
/// one thread at a time (Node): drive them, and accept(), from one thread, or
/// give each thread a Server of its own; a call that overlaps another
/// thread's is refused with UsageError, never a crash.
class Connection {
public:
    static Connection connect(std::string_view host_port, const Options& options,
                              Deadline deadline);
    /// The same through a Node this process has already: one domain and one
    /// registration of its buffers for several servers. The servers must
    /// choose the Node's provider and endpoint kind (UsageError otherwise).
    static Connection connect(std::string_view host_port, const Options& options,
                              Deadline deadline, std::shared_ptr<Node> via);

    Connection(std::shared_ptr<Node> node, PeerId peer, SideChannel side);
    ~Connection();
    Connection(Connection&&) noexcept = default;
    Connection& operator=(Connection&& other) noexcept;

    /// The Node this connection is a peer of (shared by a Server's connections).
    Node& node() const { return live("Connection::node"); }
    const std::shared_ptr<Node>& node_ptr() const noexcept { return node_; }
    /// The peer on node().
    PeerId peer_id() const noexcept { return peer_id_; }
    /// The endpoint that carries this peer's traffic, for Endpoint's other
    /// calls (writev, atomics, write_batch...). On RDM it is the Node's one
    /// endpoint, shared by a Server's connections: its wait_for() and poll()
    /// hand out any peer's completions, and its close() is refused while it
    /// carries more than this peer (destroy the Connection instead). On MSG a
    /// provider that refuses an access by closing the connection (tcp, net)
    /// makes the Node connect again on a new endpoint: one taken before stays
    /// valid but closed (its calls throw UsageError); ask again.
    /// A moved-from Connection throws UsageError here and in every call below.
    Endpoint& endpoint() const { return live("Connection::endpoint").endpoint(peer_id_); }
    /// The peer's address on endpoint() (RDM), for Endpoint's calls.
    Peer peer() const { return live("Connection::peer").fabric_peer(peer_id_); }
    const Selection& selection() const { return live("Connection::selection").selection(); }
    const std::shared_ptr<Domain>& domain() const { return live("Connection::domain").domain(); }
    SideChannel& side() noexcept { return side_; }
    /// Client side: the server's Selection::report(), i.e. which provider it
    /// chose and why (empty on the server side).
    const std::string& peer_report() const noexcept { return peer_report_; }

    /// Registration on the Node's domain: usable with every peer of the Node.
    std::shared_ptr<MemoryRegion> register_memory(std::span<std::byte> memory, Access access) const
    {
        return live("Connection::register_memory").register_memory(memory, access);
    }
    std::shared_ptr<MemoryRegion> allocate(std::size_t size, Access access) const
    {
        return live("Connection::allocate").allocate(size, access);
    }

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
    /// Returns once both sides have called it, and every write either side
    /// completed before calling it is in the other side's memory (each side
    /// flushes its writes first: Endpoint::flush). Drives this side's progress
    /// while it waits, so a peer's flush never waits for it.
    void barrier(Deadline deadline);

    // Data path to the peer (Node's), inlined into the caller so that the
    // layers add no call of their own. A failure says what it means for the
    // peer: Error::peer_lost() when the peer has gone (its side channel
    // closed), or, when it is still there, that it most likely refused the
    // access.
    [[gnu::always_inline]] void write(Local src, const RemoteRegion& dst, std::uint64_t off,
                                      void* ctx) const
    {
        try {
            live("Connection::write").write(peer_id_, src, dst, off, ctx);
        } catch (const Error& e) {
            explain(e);
        }
    }
    [[gnu::always_inline]] void read(Local dst, const RemoteRegion& src, std::uint64_t off,
                                     void* ctx) const
    {
        try {
            live("Connection::read").read(peer_id_, dst, src, off, ctx);
        } catch (const Error& e) {
            explain(e);
        }
    }
    /// Several ranges of `src` in one operation, one completion (Node::read_ranges).
    [[gnu::always_inline]] void read_ranges(std::span<const Endpoint::Read> reads,
                                            const RemoteRegion& src, void* ctx) const
    {
        try {
            live("Connection::read_ranges").read_ranges(peer_id_, reads, src, ctx);
        } catch (const Error& e) {
            explain(e);
        }
    }
    /// Most ranges read_ranges() takes to this peer.
    std::size_t read_ranges_limit() const
    {
        return live("Connection::read_ranges_limit").read_ranges_limit(peer_id_);
    }
    [[gnu::always_inline]] void write_notify(Local src, const RemoteRegion& dst,
                                             std::uint64_t off, std::uint32_t value,
                                             void* ctx) const
    {
        try {
            live("Connection::write_notify").write_notify(peer_id_, src, dst, off, value, ctx);
        } catch (const Error& e) {
            explain(e);
        }
    }
    [[gnu::always_inline]] void send(Local src, void* ctx) const
    {
        try {
            live("Connection::send").send(peer_id_, src, ctx);
        } catch (const Error& e) {
            explain(e);
        }
    }
    /// The completion of the operation posted with `context`; Error with
    /// peer_lost() as soon as the peer is gone.
    Completion wait(void* context, Deadline deadline) const
    {
        try {
            return live("Connection::wait").wait(context, peer_id_, deadline);
        } catch (const Error& e) {
            explain(e);
        }
    }
    /// The next `op` this peer caused (a notification or a message); other
    /// peers' are kept for their Connections.
    Completion wait_for(Op op, Deadline deadline) const
    {
        try {
            return live("Connection::wait_for").wait_for(op, peer_id_, deadline);
        } catch (const Error& e) {
            explain(e);
        }
    }

private:
    [[gnu::always_inline]] Node& live(const char* call) const
    {
        if (!node_) [[unlikely]]
            moved_from(call);
        return *node_;
    }
    [[noreturn]] static void moved_from(const char* call);
    /// Rethrows `e`, as a lost peer when the side channel says the peer has gone.
    [[noreturn]] void explain(const Error& e) const;
    void end() noexcept;

    std::shared_ptr<Node> node_;
    PeerId peer_id_;
    SideChannel side_;
    std::string peer_report_;
    std::string host_port_; // client side: where reconnect() goes
    // barrier(): a byte the peer reads to flush its writes, and the peer's.
    std::shared_ptr<MemoryRegion> flush_mr_;
    RemoteRegion peer_flush_;
    std::optional<Options> options_;
    int reconnects_ = 0;
};

/// Accepts Connections: owns the side-channel listener, the selection, and the
/// Node its connections are peers of.
///
/// Bootstraps run concurrently inside accept(): a client that is slow to start,
/// silent, or not weft at all costs the others nothing. Each side-channel
/// connection has Options::handshake_timeout from its TCP connect to a
/// connected endpoint; one that fails is dropped and counted (rejections()),
/// and accept() goes on waiting for the next client until its own deadline.
///
/// Threading: accept() and rejections() may be called from several threads at
/// once; each Connection comes out of exactly one accept(). A moved-from
/// Server throws UsageError.
class Server {
public:
    /// Chooses the provider now (see selection().report()) and listens on
    /// host:port for side-channel connections (port 0 = any free port).
    Server(const Options& options, std::string_view host, std::uint16_t port);
    /// The same on a side-channel listener the caller already opened.
    Server(const Options& options, SideListener listener);
    ~Server();
    Server(Server&&) noexcept;
    Server& operator=(Server&&) noexcept;

    std::uint16_t port() const;
    const Selection& selection() const;

    /// The next client whose bootstrap and fabric connection (MSG) or address
    /// exchange (RDM) completed; TimeoutError when none did before `deadline`.
    Connection accept(Deadline deadline);
    /// A client whose bootstrap completed by now, or none: one step of the
    /// bootstraps in progress, without waiting (a loop that also serves the
    /// clients it has calls it between its polls).
    std::optional<Connection> try_accept();

    /// Side-channel connections that did not become a Connection (strangers,
    /// garbage, wrong secrets, clients that failed or timed out).
    struct Rejections {
        std::uint64_t count = 0;
        std::vector<std::string> recent; ///< the last few reasons, oldest first
    };
    Rejections rejections() const;

    struct State;

private:
    State& state(const char* call) const;
    std::unique_ptr<State> state_;
};

} // namespace weft
