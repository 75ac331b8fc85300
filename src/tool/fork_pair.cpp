// SPDX-License-Identifier: MIT
// The child speaks once on a pipe: "P<port>[,<port>...]\n" when it serves,
// "E<why>" when it cannot (until the pipe's end).
#include "fork_pair.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "waits.hpp"
#include "weft/deadline.hpp"
#include "weft/detail/fd.hpp"

namespace weft::tool {

namespace {

/// Reaps `pid` within `timeout`, killing it once that has passed; its exit
/// status (1 when killed or signalled).
int reap(pid_t pid, std::chrono::milliseconds timeout)
{
    int st = 0;
    if (!detail::nap_until(Deadline::after(timeout), [&] { return waitpid(pid, &st, WNOHANG) != 0; },
                           std::chrono::milliseconds(5))) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

/// What the child writes on the pipe until it closes it, within `timeout`.
std::string rest_of(int fd, std::chrono::milliseconds timeout)
{
    std::string out;
    char ch = 0;
    const auto deadline = Deadline::after(timeout);
    for (pollfd p{fd, POLLIN, 0}; ::poll(&p, 1, deadline.remaining_ms()) > 0 && read(fd, &ch, 1) == 1;)
        out += ch;
    return out;
}

} // namespace

int fork_pair(const std::string& host, std::chrono::milliseconds timeout,
              std::optional<CpuPair> pin, const std::function<void(const Announce&)>& serve,
              const std::function<int(const std::vector<std::string>& host_ports)>& drive)
{
    // The client's CPU first: the child inherits it, then moves to its own.
    if (pin)
        if (const auto err = pin_to(pin->client); !err.empty())
            throw std::runtime_error(err);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe2 failed");
    detail::Fd from_child(fds[0]);
    detail::Fd to_parent(fds[1]);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        from_child.reset();
        int status = 0;
        try {
            if (pin)
                if (const auto err = pin_to(pin->server); !err.empty())
                    throw std::runtime_error(err);
            serve([&](std::span<const std::uint16_t> ports) {
                std::string msg = "P";
                for (std::size_t i = 0; i < ports.size(); ++i)
                    msg += fmt::format("{}{}", i ? "," : "", ports[i]);
                msg += "\n";
                (void)!write(to_parent.get(), msg.data(), msg.size());
            });
        } catch (const std::exception& e) {
            const auto msg = fmt::format("E{}", e.what());
            (void)!write(to_parent.get(), msg.data(), msg.size());
            status = 1;
        }
        to_parent.reset();
        std::fflush(nullptr);
        _exit(status);
    }
    to_parent.reset();
    // The child says either its ports or why it could not serve.
    std::string line;
    char ch = 0;
    const auto deadline = Deadline::after(timeout);
    while (line.empty() || line[0] == 'E' || line.back() != '\n') {
        pollfd p{from_child.get(), POLLIN, 0};
        if (::poll(&p, 1, deadline.remaining_ms()) <= 0 || read(from_child.get(), &ch, 1) != 1)
            break;
        line += ch;
    }
    if (line.empty() || line[0] != 'P') {
        from_child.reset();
        if (line.empty())
            kill(pid, SIGKILL);
        reap(pid, timeout);
        throw std::runtime_error(line.empty() ? "the server process did not start in time"
                                              : "server: " + line.substr(1));
    }
    std::vector<std::string> host_ports;
    for (std::size_t pos = 1; pos < line.size() - 1;) {
        const std::size_t end = std::min(line.find(',', pos), line.size() - 1);
        host_ports.push_back(host + ":" + line.substr(pos, end - pos));
        pos = end + 1;
    }
    int status = 0;
    try {
        status = drive(host_ports);
    } catch (...) {
        // The server's explanation, when it has one, is the better one.
        line = rest_of(from_child.get(), timeout);
        from_child.reset();
        kill(pid, SIGKILL);
        reap(pid, timeout);
        if (line.size() > 1 && line[0] == 'E')
            throw std::runtime_error("server: " + line.substr(1));
        throw;
    }
    from_child.reset();
    const int child = reap(pid, timeout);
    return status != 0 ? status : child;
}

} // namespace weft::tool
