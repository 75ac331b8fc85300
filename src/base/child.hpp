// SPDX-License-Identifier: MIT
// weft's one way to start a process and hear from it, for the library's own
// checks (doctor's cross-memory probe), the weft program (both ends of a
// ping-pong), the benchmarks and the tests: a child forked to run a function,
// which speaks on a pipe (its ports, its address, why it failed), or a program
// started with posix_spawnp, its output in a file and descriptors handed
// over. Every wait takes a deadline; a child still running when its owner
// goes is killed and reaped.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "weft/base/deadline.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft::detail {

/// A program to start.
struct Spawn {
    std::vector<std::string> argv;     ///< argv[0] is looked up in PATH
    std::vector<std::string> env = {}; ///< "NAME=value", added to (or replacing in) this environment
    std::string dir = {};              ///< its working directory; this process's when empty
    std::string output = {};           ///< a file for its stdout; this process's when empty
    bool stderr_to_output = true;      ///< stderr into `output` too (when there is one)
    bool capture = false;              ///< its stdout on a pipe to this process instead (read_*)
    /// Descriptors it gets: {one of this process's, the number it has there}.
    std::vector<std::pair<int, int>> fds = {};
};

class Child {
public:
    /// Forks. The child runs `body` with the writing end of a pipe to this
    /// process, and exits with what it returns (1 when it throws; what() goes
    /// to stderr). Fork before libfabric is set up in this process: a forked
    /// copy of a verbs context is unsafe to use.
    static Child fork(const std::function<int(int to_parent)>& body);
    /// Starts a program; throws std::system_error when it cannot.
    static Child spawn(const Spawn& what);

    Child() noexcept = default;
    Child(Child&& other) noexcept
        : pid_(std::exchange(other.pid_, -1)), wait_status_(other.wait_status_),
          from_child_(std::move(other.from_child_))
    {
    }
    Child& operator=(Child&& other) noexcept;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    /// Kills and reaps it if it still runs.
    ~Child() { kill_now(); }

    /// Its pid while it runs, -1 once reaped.
    pid_t pid() const noexcept { return pid_; }

    /// What a forked child (or a spawned one's captured stdout) wrote, up to
    /// and with `delim`, or until it closed its end or `deadline` passed (then
    /// without `delim`).
    std::string read_until(char delim, Deadline deadline)
    {
        return read_to(static_cast<unsigned char>(delim), deadline);
    }
    /// Everything it writes until it closes its end (or `deadline` passes).
    std::string read_rest(Deadline deadline) { return read_to(-1, deadline); }
    /// Exactly `n` bytes it wrote; false when it closed its end or `deadline`
    /// passed first.
    bool read_exact(void* out, std::size_t n, Deadline deadline);
    /// Closes this end of the pipe: a child that writes gets EPIPE.
    void stop_listening() noexcept { from_child_.reset(); }

    /// Whether it has ended by `deadline` (reaped then).
    bool wait(Deadline deadline);
    /// Waits until it ends, killing it once `deadline` has passed; its status().
    int finish(Deadline deadline);
    /// Whether it ended (and was reaped) already.
    bool reaped();
    /// Its exit status, or 128 + the signal that ended it; -1 while it runs.
    int status() const noexcept;
    /// waitpid's status (WIFSIGNALED, WTERMSIG); -1 while it runs.
    int wait_status() const noexcept { return wait_status_; }
    void signal(int sig) const noexcept;
    /// SIGKILL now, and reap.
    void kill_now() noexcept;

private:
    /// Up to and with `delim` (a byte value; -1: none, to the end).
    std::string read_to(int delim, Deadline deadline);
    Child(pid_t pid, Fd from_child) noexcept : pid_(pid), from_child_(std::move(from_child)) {}

    pid_t pid_ = -1;
    int wait_status_ = -1;
    Fd from_child_;
};

} // namespace weft::detail
