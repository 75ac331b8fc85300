// SPDX-License-Identifier: MIT
// Waiting for a condition with a deadline: the one loop behind "until it
// holds or the time is up" in the tests.
#pragma once

#include <chrono>
#include <thread>

#include "weft/base/deadline.hpp"

namespace weft::test {

/// A 10 ms nap: what a test does between looks at something another thread
/// or process changes.
inline void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }

/// Tries `done` until it holds or `deadline` has passed, calling `between`
/// between tries (drive progress, poll, nap); whether it held. `done` is tried
/// at least once, and once more after the last `between`.
template <class Done, class Between>
bool eventually(Deadline deadline, Done&& done, Between&& between)
{
    for (;;) {
        if (done())
            return true;
        if (deadline.expired())
            return false;
        between();
    }
}

template <class Done>
bool eventually(Deadline deadline, Done&& done)
{
    return eventually(deadline, done, nap);
}

} // namespace weft::test
