// SPDX-License-Identifier: MIT
/// @brief One owner of a file descriptor (weft's own: not part of its API):
/// closed with its owner, moved never copied, so classes that hold one need
/// no move operations or destructor of their own.
#pragma once

#include <utility>

namespace weft::detail {

/// Closes `fd` (EINTR is not retried: Linux has closed it already).
void close_fd(int fd) noexcept;

class Fd {
public:
    Fd() noexcept = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    Fd(Fd&& other) noexcept : fd_(other.release()) {}
    Fd& operator=(Fd&& other) noexcept
    {
        if (this != &other)
            reset(other.release());
        return *this;
    }
    ~Fd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    /// Gives the descriptor up without closing it.
    int release() noexcept { return std::exchange(fd_, -1); }
    /// Closes the descriptor held, if any, and holds `fd`.
    void reset(int fd = -1) noexcept
    {
        if (fd_ >= 0)
            close_fd(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

} // namespace weft::detail
