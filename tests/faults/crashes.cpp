// SPDX-License-Identifier: MIT
// A crash in a weft program shows as a crash: killed by its signal, no
// backtrace file left behind (providers/psm.cpp undoes libinfinipath's handlers).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "support/process.hpp"

TEST_CASE("signals: a crashing weft program dies of its signal and leaves no file",
          "[signals][process]")
{
    const auto dir = std::filesystem::temp_directory_path() /
                     ("weft-crash-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const auto& [how, sig] : {std::pair{"segv", SIGSEGV}, std::pair{"abort", SIGABRT}}) {
        INFO(how);
        // The crashing program (programs/crash.cpp) runs in `dir`.
        weft::test::Process crash({{WEFT_TEST_CRASH_PATH, how}, {}, dir.string()}, "crash");
        (void)crash.finish();
        const int status = crash.wait_status();
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == sig);
    }
    CHECK(std::filesystem::is_empty(dir)); // no PROG.80s-PID,HOST.btr
    std::filesystem::remove_all(dir);
}
