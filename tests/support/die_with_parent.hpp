// SPDX-License-Identifier: MIT
// For the programs tests start (tests/programs/): end when the test that
// started them is gone. A test killed mid-way (a ctest timeout, a Ctrl-C)
// would otherwise leave a child spinning on its own for good (the dead-writer
// test's readers spin on a lock the killed writer held, by design). Watched
// by the parent process's id, not PR_SET_PDEATHSIG: that fires when the
// *thread* that started the child ends, and tests start children from
// helper threads that end long before the test does.
#pragma once

#include <unistd.h>

#include <chrono>
#include <thread>

namespace weft::test {

inline void die_with_parent()
{
    const pid_t parent = ::getppid();
    if (parent == 1) // the test ended before this program began
        ::_exit(3);
    std::thread([parent] {
        for (;;) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            if (::getppid() != parent) // reparented: the test process ended
                ::_exit(3);
        }
    }).detach();
}

} // namespace weft::test
