// SPDX-License-Identifier: MIT
#include "weft/bootstrap/bootstrap.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "side_wire.hpp"
#include "socket.hpp"
#include "weft/base/error.hpp"
#include "weft/base/version.hpp"

namespace weft {
namespace {

using detail::address_text;
using detail::resolve;
using detail::set_nodelay;
using detail::set_nonblocking;
using detail::side_fail;
using detail::wait_fd;
namespace side = detail::side;

} // namespace

std::string_view detail::to_string(detail::Frame f) noexcept
{
    switch (f) {
    case detail::Frame::hello: return "hello";
    case detail::Frame::offer: return "offer";
    case detail::Frame::ready: return "ready";
    case detail::Frame::region: return "region";
    case detail::Frame::barrier: return "barrier";
    case detail::Frame::data: return "data";
    case detail::Frame::error: return "error";
    case detail::Frame::challenge: return "challenge";
    case detail::Frame::proof: return "proof";
    case detail::Frame::store: return "store request";
    case detail::Frame::store_answer: return "store answer";
    }
    return "unknown";
}

std::pair<std::string, std::uint16_t> split_host_port(std::string_view text)
{
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            throw UsageError("split_host_port", -FI_EINVAL, "",
                             fmt::format("'{}' is not [ipv6]:port", text));
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos)
            throw UsageError("split_host_port", -FI_EINVAL, "",
                             fmt::format("'{}' has no port: write host:port, e.g. "
                                         "192.168.1.5:7471",
                                         text));
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    unsigned value = 0;
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        (value = static_cast<unsigned>(std::stoul(std::string(port)))) > 65535)
        throw UsageError("split_host_port", -FI_EINVAL, "",
                         fmt::format("'{}' in '{}' is not a port number (0-65535)", port, text));
    return {std::string(host), static_cast<std::uint16_t>(value)};
}

// ---- SideChannel ----

SideChannel::SideChannel(int fd, std::string peer, Deadline deadline, detail::Role role,
                         std::string_view secret)
    : fd_(fd), peer_(std::move(peer))
{
    set_nonblocking(fd);
    set_nodelay(fd);
    hello(deadline, role, secret); // a throw closes the socket (fd_'s owner)
}

SideChannel SideChannel::connect(std::string_view host, std::uint16_t port, Deadline deadline,
                                 std::string_view secret, const RetryPolicy& retry)
{
    if (!secret.empty())
        check_secret(secret);
    const std::string peer = fmt::format("{}:{}", host, port);
    const auto start = Clock::now();
    auto backoff = std::max(retry.initial, std::chrono::milliseconds(1));
    std::string last_error = "no address";
    for (int attempt = 1;; ++attempt) {
        auto addrs = resolve(host, port, false);
        for (const addrinfo* a = addrs.get(); a; a = a->ai_next) {
            detail::Fd owned(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
            if (!owned)
                continue;
            const int fd = owned.get();
            set_nonblocking(fd);
            detail::share_port(fd);
            int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                if (wait_fd(fd, POLLOUT, deadline)) {
                    int err = 0;
                    socklen_t len = sizeof err;
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
                    rc = err ? -1 : 0;
                    errno = err;
                } else {
                    errno = ETIMEDOUT;
                }
            }
            if (rc == 0)
                return SideChannel(owned.release(), peer, deadline, detail::Role::connector, secret);
            last_error = std::strerror(errno);
        }
        // Refused or unreachable: the server may not be up yet, or restarting
        // (libfabric#6682 never retried); back off and try again, per policy.
        const auto spent =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        if (retry.attempts > 0 && attempt >= retry.attempts)
            side_fail(-FI_ECONNREFUSED,
                      fmt::format("the weft server at {} could not be reached in {} attempt{} over {} "
                                  "ms (RetryPolicy: attempts {}, backoff {}..{} ms; last error: {}): "
                                  "is the server running there, and is the port open?",
                                  peer, attempt, attempt == 1 ? "" : "s", spent, retry.attempts,
                                  retry.initial.count(), retry.max.count(), last_error));
        if (deadline.remaining() <= backoff)
            side_fail(-FI_ETIMEDOUT,
                      fmt::format("could not reach the weft server at {} before the deadline ({} "
                                  "attempts over {} ms; last error: {}): is a weft Server listening "
                                  "there, and is the port open?",
                                  peer, attempt, spent, last_error));
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::max(retry.max, retry.initial));
    }
}

void SideChannel::live(std::string_view call) const
{
    if (!fd_)
        throw UsageError(std::string(call), -FI_EINVAL, "",
                         "this SideChannel was moved from (or its Connection was): use the object "
                         "it was moved to");
}

void SideChannel::write_all(const void* p, std::size_t n, Deadline deadline, bool late,
                            std::string_view what)
{
    live("SideChannel::send");
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::send(fd_.get(), c, n, MSG_NOSIGNAL);
        if (w > 0) {
            c += w;
            n -= static_cast<std::size_t>(w);
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd_.get(), POLLOUT, deadline))
                side_fail(-FI_ETIMEDOUT,
                          late ? detail::late_text("sending " + std::string(what), peer_)
                               : fmt::format("sending {} to {} timed out: the peer stopped reading",
                                             what, peer_));
            continue;
        }
        side_fail(-FI_ECONNRESET, fmt::format("the peer {} closed the side channel while weft sent "
                                              "{} ({}): it exited or failed (its own output says why)",
                                              peer_, what, std::strerror(errno)));
    }
}

void SideChannel::read_all(void* p, std::size_t n, Deadline deadline, bool late,
                           std::string_view what)
{
    live("SideChannel::receive");
    auto* c = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t r = ::recv(fd_.get(), c, n, 0);
        if (r > 0) {
            c += r;
            n -= static_cast<std::size_t>(r);
            continue;
        }
        if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE)))
            side_fail(-FI_ECONNRESET,
                      fmt::format("the peer {} closed the side channel while weft waited for {}: it "
                                  "exited or failed (its own output says why)",
                                  peer_, what));
        if (errno == EAGAIN || errno == EINTR) {
            if (!wait_fd(fd_.get(), POLLIN, deadline))
                side_fail(-FI_ETIMEDOUT,
                          late ? detail::late_text("waiting for " + std::string(what), peer_)
                               : fmt::format("{} did not come from {} before the deadline: the "
                                             "peer is alive but silent (stuck, or not a weft peer?)",
                                             what, peer_));
            continue;
        }
        side_fail(-FI_ECONNRESET, fmt::format("the side channel to {} broke while waiting for {} ({})",
                                              peer_, what, std::strerror(errno)));
    }
}

void SideChannel::send(detail::Frame type, std::span<const std::byte> payload, Deadline deadline)
{
    const auto h = side::encode_header(type, payload.size());
    const auto what = fmt::format("the {} frame", to_string(type));
    const bool late = deadline.expired();
    try {
        write_all(h.data(), h.size(), deadline, late, what);
        if (!payload.empty())
            write_all(payload.data(), payload.size(), deadline, late, what);
    } catch (const Error& e) {
        if (e.code() != -FI_ECONNRESET || type == detail::Frame::error)
            throw;
        // A peer that gave up on this side (a server rejecting a slow client)
        // says why in an error frame before it closes: that beats "broken pipe".
        side::Header next{};
        const side::Header error_head = side::encode_header(detail::Frame::error, 0);
        constexpr std::size_t before_size = 8; // magic, version, type
        const bool error_waits =
            readable(std::chrono::milliseconds(100)) &&
            ::recv(fd_.get(), next.data(), next.size(), MSG_PEEK | MSG_DONTWAIT) ==
                static_cast<ssize_t>(next.size()) &&
            std::memcmp(next.data(), error_head.data(), before_size) == 0;
        if (error_waits) // raised as the peer's error, with its text
            (void)receive(detail::Frame::error, Deadline::after(std::chrono::milliseconds(100)));
        throw;
    }
}

std::vector<std::byte> SideChannel::receive(detail::Frame expected, Deadline deadline)
{
    const auto what = fmt::format("the {} frame", to_string(expected));
    side::Header h{};
    const bool late = deadline.expired();
    read_all(h.data(), h.size(), deadline, late, what);
    const side::FrameHead head = side::decode_header(h, peer_);
    std::vector<std::byte> payload(head.size);
    if (head.size)
        read_all(payload.data(), head.size, deadline, late, what);
    side::check_frame(head, expected, payload, peer_);
    return payload;
}

void SideChannel::send_error(std::string_view what) noexcept
{
    try {
        send(detail::Frame::error, std::as_bytes(std::span(what.data(), what.size())),
             Deadline::after(std::chrono::seconds(1)));
    } catch (...) {
    }
}

void SideChannel::hello(Deadline deadline, detail::Role role, std::string_view secret)
{
    std::vector<std::byte> theirs;
    bool early = false; // the peer's hello, read after our send failed
    try {
        send(detail::Frame::hello, side::hello_payload(!secret.empty()), deadline);
    } catch (const Error&) {
        // The peer may have said why before closing (not weft, wrong version,
        // a malformed hello): that explanation beats "broken pipe".
        theirs = receive(detail::Frame::hello, Deadline::after(std::chrono::milliseconds(100)));
        if (theirs.size() >= 4)
            throw;
        early = true;
    }
    if (!early)
        theirs = receive(detail::Frame::hello, deadline);
    side::check_hello(theirs, !secret.empty(), peer_);
    if (!secret.empty())
        authenticate(deadline, role, secret);
}

bool SideChannel::readable(std::chrono::milliseconds wait) const
{
    live("SideChannel::readable");
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
}

bool SideChannel::peer_closed(std::chrono::milliseconds wait) const
{
    if (!fd_)
        return true;
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0)
        return false; // nothing: the peer is there and silent
    char byte = 0;
    const ssize_t n = ::recv(fd_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

std::string SideChannel::local_address() const
{
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        return {};
    return address_text(reinterpret_cast<sockaddr*>(&ss));
}

std::string SideChannel::peer_address() const
{
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getpeername(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0)
        return {};
    return address_text(reinterpret_cast<sockaddr*>(&ss));
}

} // namespace weft
