// SPDX-License-Identifier: MIT
// One side-channel connection inside a poll loop (the Server's bootstraps,
// the TCP store's server): a non-blocking socket with the bytes that came in
// and the frames waiting to go out, and the acceptor's half of the hello and
// shared-secret exchange, one frame at a time. The blocking SideChannel
// (bootstrap.cpp) speaks the same frames (side_wire.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "side_wire.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft::detail::side {

/// A whole frame taken from a Stream.
struct Received {
    FrameHead head;
    std::vector<std::byte> payload;
};

class Stream {
public:
    /// Takes a connected non-blocking socket; `peer` names it in errors.
    Stream(Fd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}

    int fd() const noexcept { return fd_.get(); }
    const std::string& peer() const noexcept { return peer_; }
    /// Gives the socket away (a SideChannel takes it over); this Stream is then inert.
    int release() noexcept { return fd_.release(); }

    void queue(detail::Frame type, std::span<const std::byte> payload);
    bool sending() const noexcept { return !out_.empty(); }
    /// Sends what it can; true when nothing is left. Throws weft::Error when
    /// the peer closed.
    bool flush();
    /// Reads what arrived; throws weft::Error when the peer closed, saying the
    /// other side was waiting for `waiting_for`.
    void receive(std::string_view waiting_for);
    /// The next whole frame that arrived, if any (headers checked).
    std::optional<Received> next();
    /// Bytes received that are not yet a whole frame.
    std::size_t unread() const noexcept { return in_.size(); }

private:
    Fd fd_;
    std::string peer_;
    std::vector<std::byte> in_;
    std::vector<std::byte> out_;
    std::size_t out_sent_ = 0;
};

/// The acceptor's hello and shared-secret check (bootstrap.hpp has the
/// protocol): start() queues our hello; each frame the peer sends goes to
/// on_frame() until it returns true.
class AcceptorHello {
public:
    explicit AcceptorHello(std::string_view secret) : secret_(secret) {}
    void start(Stream& s) const;
    /// True once the peer is through: its hello, and with a secret its proof
    /// (ours is then queued). Throws weft::Error on a bad hello or a failed
    /// proof (the peer is told, and nothing else is sent to it).
    bool on_frame(Stream& s, const Received& frame);
    bool authenticated() const noexcept { return authenticated_; }
    /// The peer's hello arrived and passed (it may be told why it is refused).
    bool heard() const noexcept { return proof_ || authenticated_; }
    /// What the acceptor waits for, for error messages.
    const char* waiting_for() const noexcept
    {
        return proof_ ? "its shared-secret proof" : "its hello";
    }

private:
    std::string secret_;
    Nonce challenge_{};
    bool proof_ = false; // the hello passed, the challenge went out
    bool authenticated_ = false;
};

} // namespace weft::detail::side
