// SPDX-License-Identifier: MIT
/// @brief The out-of-band side channel: a TCP connection (host:port) over which
/// two peers exchange endpoint addresses and RemoteRegions before any fabric
/// traffic.
///
/// Frame (all integers little-endian): magic "WEFT" (4 bytes), protocol version
/// (u16), type (u16), payload length (u32, at most 1 MiB), payload. Both sides
/// send a Hello first; a version mismatch, garbage, or a vanished peer gives an
/// error that says which of these happened and what to do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/deadline.hpp"

namespace weft {

inline constexpr std::uint16_t bootstrap_version = 1;

enum class Frame : std::uint16_t {
    hello = 1,   ///< protocol and library version
    offer = 2,   ///< server -> client: provider, endpoint kind, fabric address, token
    ready = 3,   ///< client -> server: the client's endpoint address (RDM) or nothing
    region = 4,  ///< a RemoteRegion (RemoteRegion::Wire)
    barrier = 5, ///< no payload
    data = 6,    ///< application bytes
    error = 7,   ///< the peer failed; the payload says why
};
std::string_view to_string(Frame f) noexcept;

/// A connected side channel. Move-only; closes its socket.
class SideChannel {
public:
    /// Connects to host:port, retrying refused connections with backoff until
    /// `deadline` (the server may start late), then exchanges Hello.
    static SideChannel connect(std::string_view host, std::uint16_t port, Deadline deadline);

    SideChannel(SideChannel&& other) noexcept;
    SideChannel& operator=(SideChannel&& other) noexcept;
    ~SideChannel();

    void send(Frame type, std::span<const std::byte> payload, Deadline deadline);
    /// Receives the next frame, which must be `expected` (an `error` frame from
    /// the peer is raised as weft::Error with its text).
    std::vector<std::byte> receive(Frame expected, Deadline deadline);

    /// True when the peer has sent something (or closed): a receive will not block.
    bool readable() const;

    /// Tells the peer why this side failed (best effort, never throws).
    void send_error(std::string_view what) noexcept;

    /// "host:port" of the peer, and the local IP address used to reach it.
    const std::string& peer() const noexcept { return peer_; }
    std::string local_address() const;
    std::string peer_address() const;
    int fd() const noexcept { return fd_; }

    /// Used by SideListener; does the Hello exchange.
    SideChannel(int fd, std::string peer, Deadline deadline);

private:
    void write_all(const void* p, std::size_t n, Deadline deadline, std::string_view what);
    void read_all(void* p, std::size_t n, Deadline deadline, std::string_view what);
    void hello(Deadline deadline);

    int fd_ = -1;
    std::string peer_;
};

/// Listens for side-channel connections.
class SideListener {
public:
    /// `host` empty or "0.0.0.0" listens on every interface; port 0 picks a free one.
    SideListener(std::string_view host, std::uint16_t port);
    SideListener(SideListener&& other) noexcept;
    SideListener& operator=(SideListener&& other) noexcept;
    ~SideListener();

    std::uint16_t port() const noexcept { return port_; }
    const std::string& host() const noexcept { return host_; }
    SideChannel accept(Deadline deadline);

private:
    int fd_ = -1;
    std::string host_;
    std::uint16_t port_ = 0;
};

/// Splits "host:port" (or "[v6]:port"); throws UsageError on a malformed string.
std::pair<std::string, std::uint16_t> split_host_port(std::string_view text);

} // namespace weft
