// SPDX-License-Identifier: MIT
// weft-test-peer as a child process: spawned with arguments, its first output
// line read ("PORT n" or "STREAMING"), killed and reaped on scope exit.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "weft/deadline.hpp"

extern char** environ;

namespace weft::test {

class PeerProcess {
public:
    /// Runs `path` with `args`; waits for its first line and keeps it.
    PeerProcess(const char* path, const std::vector<std::string>& args)
    {
        int out[2];
        if (pipe(out) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_addclose(&fa, out[0]);
        std::vector<char*> argv{const_cast<char*>(path)};
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        if (const int e = posix_spawn(&pid_, path, &fa, nullptr, argv.data(), environ))
            throw std::system_error(e, std::generic_category(), path);
        posix_spawn_file_actions_destroy(&fa);
        close(out[1]);
        FILE* f = fdopen(out[0], "r");
        char line[128] = {};
        const bool got = std::fgets(line, sizeof line, f) != nullptr;
        std::fclose(f);
        if (!got) {
            // Not REQUIRE: peers are also started from helper threads, where
            // a Catch assertion would terminate the test program.
            int st = 0;
            waitpid(pid_, &st, 0);
            pid_ = -1;
            throw std::runtime_error(fmt::format(
                "{} ended before printing its first line ({}): its stderr above says why", path,
                WIFEXITED(st) ? fmt::format("exit {}", WEXITSTATUS(st))
                              : fmt::format("signal {}", WTERMSIG(st))));
        }
        first_line_ = line;
        unsigned port = 0;
        if (std::sscanf(line, "PORT %u", &port) == 1)
            port_ = static_cast<std::uint16_t>(port);
    }
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;
    ~PeerProcess()
    {
        if (pid_ < 0)
            return;
        int st = 0;
        const auto until = Deadline::after(std::chrono::seconds(10));
        while (waitpid(pid_, &st, WNOHANG) == 0) {
            if (until.expired()) {
                kill(pid_, SIGKILL);
                waitpid(pid_, &st, 0);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    /// SIGKILL now, and reap: the peer vanishes without a word.
    void kill_now()
    {
        if (pid_ < 0)
            return;
        ::kill(pid_, SIGKILL);
        int st = 0;
        waitpid(pid_, &st, 0);
        // Its shm regions stay in /dev/shm: weft sweeps them when it next
        // opens an shm endpoint (providers/shm.cpp).
        pid_ = -1;
    }
    std::uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }
    const std::string& first_line() const { return first_line_; }

private:
    pid_t pid_ = -1;
    std::uint16_t port_ = 0;
    std::string first_line_;
};

/// Starts a PeerProcess from a helper thread (while this thread serves it, e.g.
/// in Server::accept); join() rethrows on this thread what starting it threw.
class PeerLauncher {
public:
    PeerLauncher(std::optional<PeerProcess>& into, const char* path, std::vector<std::string> args,
                 std::chrono::milliseconds delay = {})
        : thread_([this, &into, path, args = std::move(args), delay] {
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
