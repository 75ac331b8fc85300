// SPDX-License-Identifier: MIT
// How tests start a process: weft's one way (detail::Child::spawn,
// src/base/child.hpp) with its arguments, additions to the environment and a
// working directory, its output (stdout, and stderr unless asked otherwise) in
// a log file of its own. Then: its first line (a peer's "PORT n",
// support/peer_process.hpp), its output so far or once it ended (group ranks,
// mpirun, etcd, Slurm, the weft program), its status; signalled, killed and
// reaped, on scope exit too.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "child.hpp"
#include "support/eventually.hpp"
#include "weft/base/deadline.hpp"

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
    /// Starts `c` (detail::Child::spawn), its output in a temp file named for
    /// this process and `tag`. Throws std::system_error when it cannot start.
    explicit Process(Command c, const std::string& tag = "process")
    {
        static std::atomic<unsigned> serial{0};
        log_ = (std::filesystem::temp_directory_path() /
                fmt::format("weft-{}-{}-{}.log", ::getpid(), tag, serial++))
                   .string();
        name_ = c.argv.at(0);
        child_ = detail::Child::spawn({.argv = std::move(c.argv),
                                       .env = std::move(c.env),
                                       .dir = std::move(c.dir),
                                       .output = log_,
                                       .stderr_to_output = c.stderr_to_log});
    }
    Process(Process&& o) noexcept
        : child_(std::move(o.child_)), timed_out_(o.timed_out_), log_(std::move(o.log_)),
          name_(std::move(o.name_))
    {
        o.log_.clear();
    }
    Process& operator=(Process&&) = delete;
    Process(const Process&) = delete;
    /// One still running has 10 s to end on its own (a peer told to quit),
    /// then is killed; its log goes.
    ~Process()
    {
        (void)child_.finish(Deadline::after(std::chrono::seconds(10)));
        std::error_code ec;
        if (!log_.empty())
            std::filesystem::remove(log_, ec);
    }

    /// Its pid while it runs, -1 once it was reaped.
    pid_t pid() const noexcept { return child_.pid(); }
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
        std::ifstream f(fmt::format("/proc/{}/stat", pid()));
        std::string stat((std::istreambuf_iterator<char>(f)), {});
        const auto after_name = stat.rfind(')'); // the name may hold spaces
        if (after_name == std::string::npos)
            throw std::runtime_error(fmt::format("no /proc/{}/stat to read", pid()));
        std::istringstream fields(stat.substr(after_name + 2));
        std::string skip;
        for (int i = 3; i < 14; ++i) // state ... cmajflt: fields 3 to 13
            fields >> skip;
        unsigned long long user = 0, system = 0;
        fields >> user >> system;
        return double(user + system) / double(::sysconf(_SC_CLK_TCK));
    }
    /// Its exit status, or 128 + the signal that ended it; -1 while it runs.
    int status() const noexcept { return child_.status(); }
    /// waitpid's status (WIFSIGNALED, WTERMSIG); -1 while it runs.
    int wait_status() const noexcept { return child_.wait_status(); }
    /// Whether finish() had to kill it.
    bool timed_out() const noexcept { return timed_out_; }

    /// Whether it ended by `until` (reaped then).
    bool wait_until(Clock::time_point until) { return child_.wait(Deadline(until)); }
    /// Waits until it ends, killing it once `limit` has passed; its status().
    int finish(Clock::duration limit = std::chrono::seconds(180))
    {
        return finish_by(Clock::now() + limit);
    }
    int finish_by(Clock::time_point until)
    {
        timed_out_ = !child_.wait(Deadline(until));
        return child_.finish(Deadline(until));
    }
    void signal(int sig) const noexcept { child_.signal(sig); }
    /// SIGKILL now, and reap: it vanishes without a word.
    void kill_now() noexcept { child_.kill_now(); }
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
            const bool ended = child_.reaped();
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

    detail::Child child_;
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

/// How a program run through sh ended: its exit status (-1 when a signal
/// killed it: sh reports 128 + the signal) and what it wrote to stdout.
struct Exit {
    int status = -1;
    std::string out;
};

/// Runs a shell command line to its end: how it exited, and its stdout.
inline Exit exit_of(const std::string& line)
{
    const Ran ran = run_shell(line);
    return {ran.status < 128 ? ran.status : -1, ran.output};
}

/// Runs `program` with `args` through sh, its streams as `redirect` says
/// ("2>&1": both captured).
inline Exit run_program(const std::string& program, const std::string& args,
                        const std::string& redirect = "2>&1")
{
    return exit_of(program + " " + args + " " + redirect);
}

/// Whether a shell command line succeeds (its output discarded).
inline bool succeeds(const std::string& line)
{
    return run(shell(line + " >/dev/null 2>&1")).status == 0;
}

} // namespace weft::test
