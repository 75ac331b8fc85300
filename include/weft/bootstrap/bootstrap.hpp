// SPDX-License-Identifier: MIT
/// @brief The out-of-band side channel: a TCP connection (host:port) over which
/// two peers exchange endpoint addresses and RemoteRegions before any fabric
/// traffic.
///
/// Frame (all integers little-endian): magic "WEFT" (4 bytes), protocol version
/// (u16), type (u16), payload length (u32, at most 1 MiB), payload. Both sides
/// send a Hello first; a version mismatch, garbage, or a vanished peer gives an
/// error that says which of these happened and what to do.
///
/// Shared secret (optional, both sides): Hello carries a flag "this side requires
/// a shared secret". When it is set, nothing else is sent until a mutual
/// HMAC-SHA256 challenge-response has passed: the acceptor sends a 32-byte random
/// challenge Ns; the connector answers Nc || HMAC(K, "weft-v2 client" || Ns || Nc);
/// the acceptor checks it (constant time) and only then answers
/// HMAC(K, "weft-v2 server" || Nc || Ns), which the connector checks. A stranger
/// on the rendezvous port learns that a secret is required, nothing more: no
/// fabric address, no token, no key. Use a high-entropy secret (at least 16
/// bytes; e.g. `head -c 32 /dev/urandom | base64`).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/base/deadline.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/bootstrap/detail/side_frame.hpp"
#include "weft/info/options.hpp"

namespace weft {

/// A connected side channel. Move-only; closes its socket.
class SideChannel {
public:
    /// Connects to host:port, retrying refused connections with backoff until
    /// `deadline` (the server may start late), then exchanges Hello. With a
    /// `secret`, the server must prove it holds the same one (and vice versa).
    static SideChannel connect(std::string_view host, std::uint16_t port, Deadline deadline,
                               std::string_view secret = {}, const RetryPolicy& retry = {});

    /// Sends application bytes (at most 1 MiB) to the peer.
    void send(std::span<const std::byte> payload, Deadline deadline)
    {
        send(detail::Frame::data, payload, deadline);
    }
    /// Receives the peer's next send() (an error the peer reported is raised
    /// as weft::Error with its text).
    std::vector<std::byte> receive(Deadline deadline) { return receive(detail::Frame::data, deadline); }

    /// weft's own frames (addresses, regions, barriers) on the same channel.
    void send(detail::Frame type, std::span<const std::byte> payload, Deadline deadline);
    /// Receives the next frame, which must be `expected` (an `error` frame from
    /// the peer is raised as weft::Error with its text).
    std::vector<std::byte> receive(detail::Frame expected, Deadline deadline);

    /// True when the peer has sent something (or closed): a receive will not
    /// block. Waits up to `wait` for it.
    bool readable(std::chrono::milliseconds wait = {}) const;
    /// Calls `progress()` until the peer has sent something (or closed) or
    /// `deadline` passes (false), looking at the socket for up to `look` each
    /// time: a side that keeps its endpoint moving (a passive target's
    /// provider may need it) while its peer works towards its next frame.
    template <class Progress>
    bool readable_while(Progress&& progress, Deadline deadline,
                        std::chrono::milliseconds look = {}) const
    {
        while (!readable(look)) {
            progress();
            if (deadline.expired())
                return false;
        }
        return true;
    }

    /// True when the peer has closed the side channel (it exited, was killed,
    /// or closed its end), waiting up to `wait` for that to show. Data the
    /// peer sent and this side has not read yet counts as alive.
    bool peer_closed(std::chrono::milliseconds wait = {}) const;

    /// Tells the peer why this side failed (best effort, never throws).
    void send_error(std::string_view what) noexcept;

    /// "host:port" of the peer, and the local IP address used to reach it.
    const std::string& peer() const noexcept { return peer_; }
    std::string local_address() const;
    std::string peer_address() const;
    int fd() const noexcept { return fd_.get(); }

    /// True when both ends proved they hold the same shared secret.
    bool authenticated() const noexcept { return authenticated_; }

    /// Takes a connected socket and does the Hello exchange (and the shared-secret
    /// check when either side asks for it). Used by connect() and SideListener.
    SideChannel(int fd, std::string peer, Deadline deadline, detail::Role role,
                std::string_view secret = {});

private:
    friend class Server; // hands over sockets its own handshakes took through hello
    SideChannel(int fd, std::string peer, bool authenticated) noexcept
        : fd_(fd), peer_(std::move(peer)), authenticated_(authenticated)
    {
    }
    void live(std::string_view call) const;
    // `late`: the deadline had passed before the call began (not the peer's fault).
    void write_all(const void* p, std::size_t n, Deadline deadline, bool late, std::string_view what);
    void read_all(void* p, std::size_t n, Deadline deadline, bool late, std::string_view what);
    void hello(Deadline deadline, detail::Role role, std::string_view secret);
    void authenticate(Deadline deadline, detail::Role role, std::string_view secret);

    detail::Fd fd_;
    std::string peer_;
    bool authenticated_ = false;
};

/// Listens for side-channel connections.
class SideListener {
public:
    /// `host` empty or "0.0.0.0" listens on every interface; port 0 picks a free one.
    SideListener(std::string_view host, std::uint16_t port);
    std::uint16_t port() const noexcept { return port_; }
    const std::string& host() const noexcept { return host_; }
    /// The listening socket (non-blocking), for an event loop.
    int fd() const noexcept { return fd_.get(); }
    /// Accepts the next client and does the Hello (and shared-secret) exchange.
    SideChannel accept(Deadline deadline, std::string_view secret = {});

private:
    detail::Fd fd_;
    std::string host_;
    std::uint16_t port_ = 0;
};

} // namespace weft
