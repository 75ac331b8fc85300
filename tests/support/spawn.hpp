// SPDX-License-Identifier: MIT
// Processes a test starts with their output in a file (group ranks, mpirun,
// etcd): spawn, then finish() to collect status and output.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "weft/deadline.hpp"

extern char** environ;

namespace weft::test {

/// A process whose output goes to a file, killed if it outlives the test.
struct Spawned {
    pid_t pid = -1;
    std::string log;
    int status = -1;
    std::string output;
};

/// Starts `argv` with `env` added to (or replacing in) this environment, its
/// output (both streams) to a temp file named for `tag`. Throws when it
/// cannot start.
inline Spawned spawn(std::vector<std::string> argv, const std::vector<std::string>& env,
                     const std::string& tag)
{
    Spawned p;
    p.log = (std::filesystem::temp_directory_path() /
             fmt::format("weft-{}-{}.log", ::getpid(), tag))
                .string();
    std::vector<std::string> all;
    for (char** e = environ; *e; ++e) {
        const std::string_view var = *e;
        const bool replaced = std::ranges::any_of(env, [&](const std::string& v) {
            return var.substr(0, var.find('=') + 1) == v.substr(0, v.find('=') + 1);
        });
        if (!replaced)
            all.emplace_back(var);
    }
    all.insert(all.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (auto& e : all)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    const int e = posix_spawnp(&p.pid, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        throw std::system_error(e, std::generic_category(), "posix_spawnp " + argv[0]);
    return p;
}

/// What `p` has printed so far (its log, while it runs).
inline std::string output_so_far(const Spawned& p)
{
    std::ifstream f(p.log);
    std::stringstream text;
    text << f.rdbuf();
    return text.str();
}

/// Waits (up to `limit`) until `p` has printed `text`; false if it has not.
inline bool wait_for_output(const Spawned& p, std::string_view text,
                            std::chrono::milliseconds limit)
{
    const auto until = Clock::now() + limit;
    while (output_so_far(p).find(text) == std::string::npos) {
        if (Clock::now() > until)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

/// Waits for every process (180 s in all, then every one is killed) and
/// collects its status and output.
inline void finish(std::vector<Spawned>& ps)
{
    const auto until = Clock::now() + std::chrono::seconds(180);
    for (Spawned& p : ps) {
        int st = 0;
        while (waitpid(p.pid, &st, WNOHANG) == 0) {
            if (Clock::now() > until) { // a hang: end every one, and say so
                for (const Spawned& k : ps)
                    ::kill(k.pid, SIGKILL);
                (void)waitpid(p.pid, &st, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        std::ifstream f(p.log);
        std::stringstream text;
        text << f.rdbuf();
        p.output = text.str();
        std::filesystem::remove(p.log);
    }
}

} // namespace weft::test
