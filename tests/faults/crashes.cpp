// SPDX-License-Identifier: MIT
// A crash in a weft program shows as a crash: killed by its signal, no
// backtrace file left behind (providers/psm.cpp undoes libinfinipath's handlers).
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

extern char** environ;

namespace {

/// Runs the crashing program in `dir`; returns its wait status.
int run_in(const std::filesystem::path& dir, const char* how)
{
    const auto here = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    pid_t pid = -1;
    char* argv[] = {const_cast<char*>(WEFT_TEST_CRASH_PATH), const_cast<char*>(how), nullptr};
    const int e = posix_spawn(&pid, WEFT_TEST_CRASH_PATH, nullptr, nullptr, argv, environ);
    std::filesystem::current_path(here);
    REQUIRE(e == 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return status;
}

} // namespace

TEST_CASE("signals: a crashing weft program dies of its signal and leaves no file",
          "[signals][process]")
{
    const auto dir = std::filesystem::temp_directory_path() /
                     ("weft-crash-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const auto& [how, sig] : {std::pair{"segv", SIGSEGV}, std::pair{"abort", SIGABRT}}) {
        INFO(how);
        const int status = run_in(dir, how);
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == sig);
    }
    CHECK(std::filesystem::is_empty(dir)); // no PROG.80s-PID,HOST.btr
    std::filesystem::remove_all(dir);
}
