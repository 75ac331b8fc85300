// SPDX-License-Identifier: MIT
#include "side_stream.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "socket.hpp"
#include "weft/base/error.hpp"

namespace weft::detail::side {

void Stream::queue(detail::Frame type, std::span<const std::byte> payload)
{
    const auto h = encode_header(type, payload.size());
    out_.insert(out_.end(), h.begin(), h.end());
    out_.insert(out_.end(), payload.begin(), payload.end());
}

bool Stream::flush()
{
    while (out_sent_ < out_.size()) {
        const ssize_t n =
            ::send(fd_.get(), out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
        if (n > 0) {
            out_sent_ += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return false;
        side_fail(-FI_ECONNRESET, fmt::format("{} closed the side channel while it was sent to "
                                              "({})",
                                              peer_, std::strerror(errno)));
    }
    out_.clear();
    out_sent_ = 0;
    return true;
}

void Stream::receive(std::string_view waiting_for)
{
    std::array<std::byte, 4096> buf;
    for (;;) {
        const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
        if (n > 0) {
            in_.insert(in_.end(), buf.begin(), buf.begin() + n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        side_fail(-FI_ECONNRESET, fmt::format("{} closed the side channel while this side waited "
                                              "for {}",
                                              peer_, waiting_for));
    }
}

std::optional<Received> Stream::next()
{
    if (in_.size() < header_size)
        return std::nullopt;
    const auto head =
        decode_header(std::span<const std::byte, header_size>(in_.data(), header_size), peer_);
    const auto end = static_cast<std::ptrdiff_t>(header_size + head.size);
    if (in_.size() < static_cast<std::size_t>(end))
        return std::nullopt;
    Received r{head, std::vector<std::byte>(in_.begin() + header_size, in_.begin() + end)};
    in_.erase(in_.begin(), in_.begin() + end);
    return r;
}

void AcceptorHello::start(Stream& s) const { s.queue(detail::Frame::hello, hello_payload(!secret_.empty())); }

bool AcceptorHello::on_frame(Stream& s, const Received& frame)
{
    if (!proof_) {
        check_frame(frame.head, detail::Frame::hello, frame.payload, s.peer());
        check_hello(frame.payload, !secret_.empty(), s.peer());
        if (secret_.empty())
            return true;
        challenge_ = random_nonce();
        s.queue(detail::Frame::challenge, challenge_);
        proof_ = true;
        return false;
    }
    check_frame(frame.head, detail::Frame::proof, frame.payload, s.peer());
    Mac proof{};
    try {
        proof = acceptor_proof(secret_, challenge_, frame.payload, s.peer());
    } catch (const Error&) {
        s.queue(detail::Frame::error, std::as_bytes(std::span(secret_mismatch)));
        try {
            (void)s.flush();
        } catch (const Error&) {
        }
        throw;
    }
    s.queue(detail::Frame::proof, proof);
    authenticated_ = true;
    return true;
}

} // namespace weft::detail::side
