// SPDX-License-Identifier: MIT
// A process that announces itself on its first line: weft-test-peer's
// "PORT n" (a server) or "STREAMING" (a client), the undumpable program's
// pid. A Process (support/process.hpp) whose first line is read at start.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/process.hpp"

namespace weft::test {

class PeerProcess {
public:
    /// Runs `path` with `args`, and waits for its first line (its stderr
    /// stays this process's).
    PeerProcess(const std::string& path, const std::vector<std::string>& args)
        : process_(command(path, args), "peer"), first_line_(process_.first_line())
    {
        unsigned port = 0;
        if (std::sscanf(first_line_.c_str(), "PORT %u", &port) == 1)
            port_ = static_cast<std::uint16_t>(port);
    }
    /// SIGKILL now, and reap: the peer vanishes without a word. (Its shm
    /// regions stay in /dev/shm: weft sweeps them when it next opens an shm
    /// endpoint, providers/shm.cpp.)
    void kill_now() { process_.kill_now(); }
    std::uint16_t port() const { return port_; }
    pid_t pid() const { return process_.pid(); }
    const std::string& first_line() const { return first_line_; }
    /// The process itself: its output, its end.
    Process& process() { return process_; }

private:
    static Command command(const std::string& path, const std::vector<std::string>& args)
    {
        Command c{{path}};
        c.argv.insert(c.argv.end(), args.begin(), args.end());
        c.stderr_to_log = false;
        return c;
    }

    Process process_;
    std::string first_line_;
    std::uint16_t port_ = 0;
};

/// Starts a PeerProcess from a helper thread (while this thread serves it, e.g.
/// in Server::accept); join() rethrows on this thread what starting it threw.
class PeerLauncher {
public:
    PeerLauncher(std::optional<PeerProcess>& into, std::string path, std::vector<std::string> args,
                 std::chrono::milliseconds delay = {})
        : thread_([this, &into, path = std::move(path), args = std::move(args), delay] {
              try {
                  std::this_thread::sleep_for(delay);
                  into.emplace(path, args);
              } catch (...) {
                  error_ = std::current_exception();
              }
          })
    {
    }
    PeerLauncher(const PeerLauncher&) = delete;
    PeerLauncher& operator=(const PeerLauncher&) = delete;
    ~PeerLauncher()
    {
        if (thread_.joinable())
            thread_.join();
    }
    void join()
    {
        thread_.join();
        if (error_)
            std::rethrow_exception(error_);
    }

private:
    std::exception_ptr error_;
    std::thread thread_; // last: starts once error_ exists
};

} // namespace weft::test
