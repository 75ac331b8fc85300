// SPDX-License-Identifier: MIT
#include "child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <string_view>
#include <system_error>

#include "waits.hpp"

extern char** environ;

namespace weft::detail {

namespace {

/// One byte from `fd` within `deadline`; false at its end, or when the
/// deadline passes first.
bool read_byte(int fd, char& ch, Deadline deadline)
{
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, deadline.remaining_ms());
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return false;
        const ssize_t n = ::read(fd, &ch, 1);
        if (n < 0 && errno == EINTR)
            continue;
        return n == 1;
    }
}

/// This environment with `additions` added, or replacing what they name.
std::vector<std::string> environment_with(const std::vector<std::string>& additions)
{
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string_view var = *e;
        const auto name = var.substr(0, var.find('=') + 1);
        if (std::ranges::none_of(additions, [&](const std::string& v) {
                return v.substr(0, v.find('=') + 1) == name;
            }))
            env.emplace_back(var);
    }
    env.insert(env.end(), additions.begin(), additions.end());
    return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings)
{
    std::vector<char*> out;
    for (auto& s : strings)
        out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

} // namespace

Child Child::fork(const std::function<int(int to_parent)>& body)
{
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0)
        throw std::system_error(errno, std::generic_category(), "pipe2 for a child process");
    Fd from_child(ends[0]);
    Fd to_parent(ends[1]);
    std::fflush(nullptr); // or the child writes what this process buffered, again
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0)
        throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0) {
        // A forked helper (the far end of `weft pingpong`, a benchmark's
        // sink) never outlives the process it serves: killed with it, it would
        // spin on its own for good.
        (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) // the parent died before the line above
            ::_exit(1);
        from_child.reset();
        int status = 1;
        try {
            status = body(to_parent.get());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "weft: child process %d: %s\n", ::getpid(), e.what());
        }
        to_parent.reset();
        std::fflush(nullptr);
        ::_exit(status);
    }
    return Child(pid, std::move(from_child));
}

Child Child::spawn(const Spawn& what)
{
    auto env = environment_with(what.env);
    auto args = what.argv;
    const auto envp = pointers(env);
    const auto argv = pointers(args);
    Fd from_child, to_parent;
    if (what.capture) {
        int ends[2];
        if (::pipe2(ends, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe2 for a child process");
        from_child.reset(ends[0]);
        to_parent.reset(ends[1]);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (to_parent) {
        posix_spawn_file_actions_adddup2(&fa, to_parent.get(), 1);
    } else if (!what.output.empty()) {
        posix_spawn_file_actions_addopen(&fa, 1, what.output.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        if (what.stderr_to_output)
            posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    for (const auto& [mine, theirs] : what.fds)
        posix_spawn_file_actions_adddup2(&fa, mine, theirs);
    if (!what.dir.empty())
        posix_spawn_file_actions_addchdir_np(&fa, what.dir.c_str());
    pid_t pid = -1;
    std::fflush(nullptr);
    const int e = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0)
        throw std::system_error(e, std::generic_category(),
                                "cannot start " + (args.empty() ? std::string("a program") : args[0]));
    return Child(pid, std::move(from_child));
}

Child& Child::operator=(Child&& other) noexcept
{
    if (this != &other) {
        kill_now();
        pid_ = std::exchange(other.pid_, -1);
        wait_status_ = other.wait_status_;
        from_child_ = std::move(other.from_child_);
    }
    return *this;
}

std::string Child::read_to(int delim, Deadline deadline)
{
    std::string out;
    for (char ch = 0; from_child_ && read_byte(from_child_.get(), ch, deadline);) {
        out += ch;
        if (static_cast<unsigned char>(ch) == delim)
            break;
    }
    return out;
}

bool Child::read_exact(void* out, std::size_t n, Deadline deadline)
{
    auto* p = static_cast<char*>(out);
    for (std::size_t got = 0; got < n; ++got)
        if (!from_child_ || !read_byte(from_child_.get(), p[got], deadline))
            return false;
    return true;
}

bool Child::reaped()
{
    if (pid_ <= 0)
        return true;
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR))
        return false;
    wait_status_ = r == pid_ ? st : -1; // ECHILD: reaped elsewhere, its status unknown
    pid_ = -1;
    return true;
}

bool Child::wait(Deadline deadline)
{
    return nap_until(deadline, [this] { return reaped(); }, std::chrono::milliseconds(1),
                     std::chrono::milliseconds(10));
}

int Child::finish(Deadline deadline)
{
    if (!wait(deadline))
        kill_now();
    return status();
}

int Child::status() const noexcept
{
    if (pid_ > 0 || wait_status_ < 0)
        return -1;
    return WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : 128 + WTERMSIG(wait_status_);
}

void Child::signal(int sig) const noexcept
{
    if (pid_ > 0)
        ::kill(pid_, sig);
}

void Child::kill_now() noexcept
{
    if (pid_ <= 0)
        return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = st;
    pid_ = -1;
}

} // namespace weft::detail
