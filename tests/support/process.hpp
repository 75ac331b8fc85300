// SPDX-License-Identifier: MIT
// The one way tests start a process: posix_spawnp with its arguments, additions
// to the environment and a working directory, its output (stdout, and stderr
// unless asked otherwise) in a log file of its own. Then: its first line (a
// peer's "PORT n", support/peer_process.hpp), its output so far or once it
// ended (group ranks, mpirun, etcd, Slurm, the weft program), its status;
// signalled, killed and reaped, on scope exit too.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "support/eventually.hpp"
#include "weft/deadline.hpp"

extern char** environ;

namespace weft::test {

/// What to start.
struct Command {
    std::vector<std::string> argv;     ///< argv[0] is looked up in PATH
    std::vector<std::string> env = {}; ///< "NAME=value", added to (or replacing in) this environment
    std::string dir = {};              ///< its working directory; this process's when empty
    bool stderr_to_log = true;         ///< stderr into the log too; else this process's stderr
};

/// A line for sh -c: for the redirections and builtins (ulimit) a test needs.
inline Command shell(std::string line) { return {{"sh", "-c", std::move(line)}}; }

class Process {
public:
    /// Starts `c`, its output in a temp file named for this process and `tag`.
    /// Throws std::system_error when it cannot start.
    explicit Process(Command c, const std::string& tag = "process")
    {
        static std::atomic<unsigned> serial{0};
        log_ = (std::filesystem::temp_directory_path() /
                fmt::format("weft-{}-{}-{}.log", ::getpid(), tag, serial++))
                   .string();
        std::vector<std::string> env;
        for (char** e = environ; *e; ++e) {
            const std::string_view var = *e;
            const auto name = var.substr(0, var.find('=') + 1);
            if (std::ranges::none_of(c.env, [&](const std::string& v) {
                    return v.substr(0, v.find('=') + 1) == name;
                }))
                env.emplace_back(var);
        }
        env.insert(env.end(), c.env.begin(), c.env.end());
        std::vector<char*> envp;
        for (auto& e : env)
            envp.push_back(e.data());
        envp.push_back(nullptr);
        std::vector<char*> argv;
        for (auto& a : c.argv)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (c.stderr_to_log)
            posix_spawn_file_actions_adddup2(&fa, 1, 2);
        if (!c.dir.empty())
            posix_spawn_file_actions_addchdir_np(&fa, c.dir.c_str());
        const int e = posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0) {
            pid_ = -1;
            throw std::system_error(e, std::generic_category(), "posix_spawnp " + c.argv[0]);
        }
        name_ = c.argv[0];
    }
    Process(Process&& o) noexcept
        : pid_(std::exchange(o.pid_, -1)), wait_status_(o.wait_status_),
          timed_out_(o.timed_out_), log_(std::move(o.log_)), name_(std::move(o.name_))
    {
        o.log_.clear();
    }
    Process& operator=(Process&&) = delete;
    Process(const Process&) = delete;
    /// One still running has 10 s to end on its own (a peer told to quit),
    /// then is killed; its log goes.
    ~Process()
    {
        if (pid_ > 0 && !wait_until(Clock::now() + std::chrono::seconds(10)))
            kill_now();
        std::error_code ec;
        if (!log_.empty())
            std::filesystem::remove(log_, ec);
    }

    /// Its pid while it runs, -1 once it was reaped.
    pid_t pid() const noexcept { return pid_; }
    /// What it has printed so far (all of it, once it ended).
    std::string output() const
    {
        std::ifstream f(log_);
        std::stringstream text;
        text << f.rdbuf();
        return text.str();
    }
    /// CPU seconds it has used so far, all its threads (/proc/PID/stat's utime + stime).
    double cpu_seconds() const
    {
        std::ifstream f(fmt::format("/proc/{}/stat", pid_));
        std::string stat((std::istreambuf_iterator<char>(f)), {});
        const auto after_name = stat.rfind(')'); // the name may hold spaces
        if (after_name == std::string::npos)
            throw std::runtime_error(fmt::format("no /proc/{}/stat to read", pid_));
        std::istringstream fields(stat.substr(after_name + 2));
        std::string skip;
        for (int i = 3; i < 14; ++i) // state ... cmajflt: fields 3 to 13
            fields >> skip;
        unsigned long long user = 0, system = 0;
        fields >> user >> system;
        return double(user + system) / double(::sysconf(_SC_CLK_TCK));
    }
    /// Its exit status, or 128 + the signal that ended it; -1 while it runs.
    int status() const noexcept
    {
        if (wait_status_ < 0)
            return -1;
        return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : 128 + WTERMSIG(wait_status_);
    }
    /// waitpid's status (WIFSIGNALED, WTERMSIG); -1 while it runs.
    int wait_status() const noexcept { return wait_status_; }
    /// Whether finish() had to kill it.
    bool timed_out() const noexcept { return timed_out_; }

    /// Whether it ended by `until` (reaped then).
    bool wait_until(Clock::time_point until)
    {
        return eventually(Deadline(until), [this] { return reaped(); });
    }
    /// Waits until it ends, killing it once `limit` has passed; its status().
    int finish(Clock::duration limit = std::chrono::seconds(180))
    {
        return finish_by(Clock::now() + limit);
    }
    int finish_by(Clock::time_point until)
    {
        if (!wait_until(until)) {
            timed_out_ = true;
            kill_now();
        }
        return status();
    }
    void signal(int sig) const noexcept
    {
        if (pid_ > 0)
            ::kill(pid_, sig);
    }
    /// SIGKILL now, and reap: it vanishes without a word.
    void kill_now()
    {
        signal(SIGKILL);
        if (pid_ > 0) {
            int st = 0;
            (void)::waitpid(pid_, &st, 0);
            wait_status_ = st;
            pid_ = -1;
        }
    }
    /// SIGTERM, and SIGKILL if it has not ended after `grace`.
    void stop(Clock::duration grace)
    {
        signal(SIGTERM);
        (void)finish(grace);
    }

    /// Waits (up to `limit`) until it has printed `text`; false if it has not.
    bool wait_for_output(std::string_view text, Clock::duration limit) const
    {
        return eventually(Deadline::after(limit),
                          [&] { return output().find(text) != std::string::npos; });
    }
    /// Its first line (without the newline), once printed. Throws, naming how
    /// it ended and what it printed, when it ends first or `limit` passes
    /// (std::runtime_error: peers are started from helper threads too, where
    /// a Catch assertion would end the test program).
    std::string first_line(Clock::duration limit = std::chrono::seconds(120))
    {
        std::string text;
        const bool got = eventually(Deadline::after(limit), [&] {
            const bool ended = reaped();
            text = output();
            return text.find('\n') != std::string::npos || ended;
        });
        if (const auto end = text.find('\n'); end != std::string::npos)
            return text.substr(0, end);
        throw std::runtime_error(fmt::format(
            "{} {} before printing its first line; it printed: '{}' (its stderr above may say why)",
            name_, got ? fmt::format("ended ({})", describe(status())) : "was silent for too long",
            text));
    }

private:
    static std::string describe(int status)
    {
        return status > 128 ? fmt::format("signal {}", status - 128) : fmt::format("exit {}", status);
    }
    /// Reaps it if it has ended; whether it has.
    bool reaped()
    {
        if (pid_ <= 0)
            return true;
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) != pid_)
            return false;
        wait_status_ = st;
        pid_ = -1;
        return true;
    }

    pid_t pid_ = -1;
    int wait_status_ = -1;
    bool timed_out_ = false;
    std::string log_;
    std::string name_;
};

/// Waits for every process, `limit` in all (then every one still running is
/// killed: a hang ends them all, and says so in their statuses).
inline void finish_all(std::vector<Process>& ps, Clock::duration limit = std::chrono::seconds(180))
{
    const auto until = Clock::now() + limit;
    for (Process& p : ps)
        if (!p.wait_until(until))
            for (Process& k : ps)
                k.signal(SIGKILL);
    for (Process& p : ps)
        (void)p.finish_by(until);
}

/// How a command that ran to its end ended, and what it printed.
struct Ran {
    int status = -1; ///< its exit status, or 128 + the signal that ended it
    std::string output;
    bool timed_out = false; ///< killed after `limit`
};

/// Runs `c` to its end (killed after `limit`).
inline Ran run(Command c, Clock::duration limit = std::chrono::seconds(180),
               const std::string& tag = "run")
{
    Process p(std::move(c), tag);
    const int status = p.finish(limit);
    return {status, p.output(), p.timed_out()};
}

/// Runs a shell command line to its end, keeping what it writes to stdout
/// (its stderr is this process's, unless the line redirects it).
inline Ran run_shell(const std::string& line, Clock::duration limit = std::chrono::seconds(180))
{
    Command c = shell(line);
    c.stderr_to_log = false;
    return run(std::move(c), limit, "sh");
}

/// Whether a shell command line succeeds (its output discarded).
inline bool succeeds(const std::string& line)
{
    return run(shell(line + " >/dev/null 2>&1")).status == 0;
}

} // namespace weft::test
