// SPDX-License-Identifier: MIT
// The same-host lane's channel: an AF_UNIX SOCK_SEQPACKET connection under an
// abstract name (nothing in the file system to clean up; a name dies with the
// process holding it). It carries whole messages with descriptors attached
// (SCM_RIGHTS: a memfd, an eventfd), and names its peer as the kernel saw it
// connect (SO_PEERCRED: only an accepted or connected socket's credentials
// are the peer's own; a socketpair made before a fork names its creator). Its
// end is the peer's end: a peer that exits or is killed closes it, which is
// how a live side learns of a dead one without spinning on anything the dead
// one held.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/base/deadline.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft::lane {

/// The peer as the kernel recorded it when it connected.
struct Credentials {
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
};

class UnixChannel {
public:
    /// The largest message and the most descriptors one message carries.
    static constexpr std::size_t max_message = 64 * 1024;
    static constexpr std::size_t max_fds = 16;

    /// Connects to the listener named `name` (UnixListener::name()). Throws
    /// weft::Error naming the cause: nobody listens there (the peer is gone,
    /// or in another network namespace), or `deadline` passed.
    static UnixChannel connect(std::string_view name, Deadline deadline);

    int fd() const noexcept { return fd_.get(); }
    Credentials peer() const;

    /// Sends one message with `fds` attached (each stays open here too).
    /// Throws weft::Error with peer_lost() when the peer has closed its end.
    void send(std::span<const std::byte> message, std::span<const int> fds, Deadline deadline);

    struct Message {
        std::vector<std::byte> bytes;
        std::vector<detail::Fd> fds; ///< close-on-exec, owned here now
    };
    /// The next message, or none when none came by `deadline`. Throws
    /// weft::Error with peer_lost() when the peer closed its end, and a plain
    /// one when a message is larger than `max_bytes` or brings more than
    /// `max_fds` descriptors (they are closed, never leaked).
    std::optional<Message> receive(std::size_t max_bytes, std::size_t max_fds, Deadline deadline);

private:
    friend class UnixListener;
    explicit UnixChannel(detail::Fd fd) noexcept : fd_(std::move(fd)) {}
    detail::Fd fd_;
};

class UnixListener {
public:
    /// Listens under a fresh random abstract name ("weft-lane-" and 32 hex
    /// digits): a name nobody can guess is the first of the lane's checks;
    /// the peer's credentials and the bootstrap's authentication follow.
    static UnixListener open();

    /// The name a peer connects to (without the leading NUL of an abstract name).
    const std::string& name() const noexcept { return name_; }
    int fd() const noexcept { return fd_.get(); }
    /// A connection waiting, or none.
    std::optional<UnixChannel> accept();
    /// The next connection, or none by `deadline`.
    std::optional<UnixChannel> accept(Deadline deadline);

private:
    UnixListener(detail::Fd fd, std::string name) noexcept
        : fd_(std::move(fd)), name_(std::move(name))
    {
    }
    detail::Fd fd_;
    std::string name_;
};

} // namespace weft::lane
