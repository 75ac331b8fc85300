// SPDX-License-Identifier: MIT
// Fuzzes the bootstrap as a peer would attack it: the input is everything the
// peer sends on the side channel (Hello, shared-secret frames, the offer, a
// RemoteRegion), fed through a socket pair to a real SideChannel. The first
// byte picks this side's role and whether it holds a shared secret. Every
// defect must end in weft::Error; anything else (a crash, another exception,
// a leak, undefined behaviour) is a finding.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "offer.hpp"
#include "weft/bootstrap/bootstrap.hpp"
#include "weft/base/error.hpp"
#include "weft/fabric/remote_region.hpp"

namespace {

void feed(int fd, const std::uint8_t* data, std::size_t size)
{
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1 || size > 64 * 1024)
        return 0;
    const std::uint8_t mode = data[0];
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    int big = 1 << 20;
    ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    feed(sv[1], data + 1, size - 1);
    ::shutdown(sv[1], SHUT_WR); // then end of stream: nothing waits for more
    const auto role = (mode & 1) ? weft::detail::Role::acceptor : weft::detail::Role::connector;
    const std::string_view secret = (mode & 2) ? "fuzzing secret, 32 bytes long.." : "";
    const auto deadline = weft::Deadline::after(std::chrono::milliseconds(200));
    try {
        weft::SideChannel side(sv[0], "fuzz-peer", deadline, role, secret);
        if (role == weft::detail::Role::connector) {
            const weft::Offer offer = weft::decode_offer(side.receive(weft::detail::Frame::offer, deadline));
            (void)offer;
        } else {
            (void)side.receive(weft::detail::Frame::ready, deadline);
        }
        for (int i = 0; i < 4; ++i)
            (void)weft::RemoteRegion::decode(side.receive(weft::detail::Frame::region, deadline));
    } catch (const weft::Error&) {
        // refused with a reason (the SideChannel closed sv[0])
    }
    ::close(sv[1]);
    return 0;
}
