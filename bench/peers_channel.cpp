// SPDX-License-Identifier: MIT
// weft-peers-bench's plumbing between the hub and its peer processes: the
// socket-pair channel, the hub's wait for its peers' done, and the usage probe.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "peers.hpp"

namespace weft::peers {
namespace {

void write_all(int fd, const void* p, std::size_t n)
{
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            throw std::runtime_error("the other process closed its channel");
        c += w;
        n -= static_cast<std::size_t>(w);
    }
}

void read_all(int fd, void* p, std::size_t n)
{
    auto* c = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t r = ::read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            throw std::runtime_error("the other process closed its channel");
        c += r;
        n -= static_cast<std::size_t>(r);
    }
}

std::size_t count_dir(const char* dir)
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
        ++n;
    return n;
}

} // namespace

Usage Usage::now()
{
    Usage u;
    std::ifstream statm("/proc/self/statm");
    std::size_t size = 0, resident = 0;
    statm >> size >> resident;
    u.rss_kib = resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) / 1024;
    u.fds = count_dir("/proc/self/fd");
    u.threads = count_dir("/proc/self/task");
    return u;
}

void Channel::send_bytes(std::span<const std::byte> b)
{
    const auto len = static_cast<std::uint32_t>(b.size());
    write_all(fd_.get(), &len, 4);
    write_all(fd_.get(), b.data(), b.size());
}

std::vector<std::byte> Channel::receive_bytes()
{
    std::uint32_t len = 0;
    read_all(fd_.get(), &len, 4);
    std::vector<std::byte> b(len);
    read_all(fd_.get(), b.data(), len);
    return b;
}

void await_done(std::vector<Child>& children, const std::function<void()>& progress,
                Deadline deadline, std::chrono::microseconds nap)
{
    const auto ns = std::chrono::nanoseconds(nap).count();
    const timespec between{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    std::size_t done = 0;
    std::vector<pollfd> fds;
    for (auto& child : children)
        fds.push_back({child.channel.fd(), POLLIN, 0});
    while (done < children.size()) {
        progress();
        if (deadline.expired())
            throw std::runtime_error(fmt::format("{} of {} peers said done before the deadline",
                                                 done, children.size()));
        if (::ppoll(fds.data(), fds.size(), &between, nullptr) <= 0)
            continue;
        for (auto& f : fds)
            if (f.revents & POLLIN) { // its done; read below
                f.fd = -1;
                ++done;
            }
    }
    for (auto& child : children)
        (void)child.channel.receive_bytes();
}

bool Channel::dismissed()
{
    // Up to 1 ms: a peer done with its part naps between its progress calls
    // instead of taking a core from the peers still at work.
    pollfd word{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&word, 1, 1);
    if (ready == 0 || (ready < 0 && errno == EINTR))
        return false;
    if (ready < 0)
        return true; // the channel is broken: nothing left to wait for
    char c = 0;
    const ssize_t r = ::recv(fd_.get(), &c, 1, MSG_DONTWAIT);
    return r == 1 || r == 0; // 0: the hub is gone (it failed): nothing left to wait for
}

void Channel::dismiss()
{
    const char c = 'q';
    write_all(fd_.get(), &c, 1);
}

} // namespace weft::peers
