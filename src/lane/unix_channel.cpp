// SPDX-License-Identifier: MIT
#include "unix_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "random.hpp"
#include "socket.hpp"
#include "errors.hpp"
#include "weft/base/error.hpp"

namespace weft::lane {
namespace {

bool gone(int e) { return e == EPIPE || e == ECONNRESET || e == ENOTCONN; }

// An abstract address: sun_path starts with NUL, the name follows, no
// terminator (the length says where it ends).
socklen_t abstract_address(std::string_view name, sockaddr_un& sa)
{
    if (name.empty() || name.size() + 1 > sizeof sa.sun_path)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("'{}' is not a lane listener's name", name));
    sa.sun_family = AF_UNIX;
    sa.sun_path[0] = '\0';
    std::memcpy(sa.sun_path + 1, name.data(), name.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

detail::Fd packet_socket()
{
    detail::Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd)
        fail_errno("socket", "an AF_UNIX socket for the same-host lane");
    return fd;
}

} // namespace

UnixListener UnixListener::open()
{
    std::array<std::byte, 16> r{};
    detail::random_bytes(r, "a lane listener's name");
    std::string name = "weft-lane-";
    for (const std::byte b : r)
        name += fmt::format("{:02x}", static_cast<unsigned>(b));
    detail::Fd fd = packet_socket();
    sockaddr_un sa{};
    const socklen_t len = abstract_address(name, sa);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
        fail_errno("bind", fmt::format("the lane listener @{}", name));
    if (::listen(fd.get(), 64) != 0)
        fail_errno("listen", fmt::format("the lane listener @{}", name));
    return UnixListener(std::move(fd), std::move(name));
}

std::optional<UnixChannel> UnixListener::accept()
{
    detail::Fd fd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) {
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
            return std::nullopt;
        fail_errno("accept4", fmt::format("the lane listener @{}", name_));
    }
    return UnixChannel(std::move(fd));
}

std::optional<UnixChannel> UnixListener::accept(Deadline deadline)
{
    for (;;) {
        if (auto c = accept())
            return c;
        if (!detail::wait_fd(fd_.get(), POLLIN, deadline))
            return std::nullopt;
    }
}

UnixChannel UnixChannel::connect(std::string_view name, Deadline deadline)
{
    sockaddr_un sa{};
    const socklen_t len = abstract_address(name, sa);
    for (;;) {
        detail::Fd fd = packet_socket();
        if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0)
            return UnixChannel(std::move(fd));
        const int e = errno;
        if (e == ECONNREFUSED || e == ENOENT)
            throw Error("connect", -e, "",
                        fmt::format("nobody listens at the lane's @{}: the peer has gone, or it is "
                                    "in another network namespace",
                                    name),
                        nullptr, true);
        if (e != EAGAIN && e != EINTR) // EAGAIN: its backlog is full for now
            fail_errno("connect", fmt::format("the lane's @{}", name));
        if (deadline.expired())
            throw TimeoutError("connect", -ETIMEDOUT, "",
                               fmt::format("the lane's @{} accepted no connection by the deadline "
                                           "(its owner does not accept)",
                                           name));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

Credentials UnixChannel::peer() const
{
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
        fail_errno("getsockopt", "SO_PEERCRED of a lane channel");
    return Credentials{c.pid, c.uid, c.gid};
}

void UnixChannel::send(std::span<const std::byte> message, std::span<const int> fds,
                       Deadline deadline)
{
    if (message.size() > max_message || fds.size() > max_fds || message.empty())
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("a lane message of {} B with {} descriptors (1 to {} B and up "
                                     "to {} descriptors)",
                                     message.size(), fds.size(), max_message, max_fds));
    iovec iov{const_cast<std::byte*>(message.data()), message.size()};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = control.data();
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    for (;;) {
        if (::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL) >= 0)
            return;
        const int e = errno;
        if (gone(e))
            fail_errno("sendmsg", "the lane's peer has closed its end", true);
        if (e != EAGAIN && e != EINTR)
            fail_errno("sendmsg", "a lane message");
        if (!detail::wait_fd(fd_.get(), POLLOUT, deadline))
            throw TimeoutError("sendmsg", -ETIMEDOUT, "",
                               "the lane's peer took no message by the deadline (it reads none)");
    }
}

std::optional<UnixChannel::Message> UnixChannel::receive(std::size_t max_bytes,
                                                         std::size_t max_fd_count,
                                                         Deadline deadline)
{
    max_bytes = std::min(max_bytes, max_message);
    Message m;
    m.bytes.resize(max_bytes + 1); // one more: a longer message shows as MSG_TRUNC
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
    for (;;) {
        iovec iov{m.bytes.data(), m.bytes.size()};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
        if (n < 0) {
            const int e = errno;
            if (gone(e))
                fail_errno("recvmsg", "the lane's peer has closed its end", true);
            if (e != EAGAIN && e != EINTR)
                fail_errno("recvmsg", "a lane message");
            if (!detail::wait_fd(fd_.get(), POLLIN, deadline))
                return std::nullopt;
            continue;
        }
        // Take every descriptor first, so none leaks whatever follows.
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < count; ++i) {
                int fd = -1;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                m.fds.emplace_back(fd);
            }
        }
        if (n == 0)
            throw Error("recvmsg", -ECONNRESET, "", "the lane's peer has closed its end", nullptr,
                        true);
        if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<std::size_t>(n) > max_bytes ||
            m.fds.size() > max_fd_count)
            throw Error("recvmsg", -EMSGSIZE, "",
                        fmt::format("a lane message larger than expected (over {} B or {} "
                                    "descriptors): the peer is not a weft lane of this version",
                                    max_bytes, max_fd_count));
        m.bytes.resize(static_cast<std::size_t>(n));
        return m;
    }
}

} // namespace weft::lane
