// SPDX-License-Identifier: MIT
// weft's two loops with a deadline: a spin that drives progress, and a nap
// that looks at something now and then. Every other wait is a call that takes
// a deadline itself (poll, epoll_wait, a socket's).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "weft/base/deadline.hpp"

namespace weft::detail {

/// `step()` (progress) until `done()`; every 256 steps (reading the clock costs
/// more than a step) `every()`, then `late()` once `deadline` has passed (it
/// throws, naming what never came).
template <class Done, class Step, class Late, class Every>
void spin_until(Deadline deadline, Done&& done, Step&& step, Late&& late, Every&& every)
{
    for (std::uint32_t spins = 1; !done(); ++spins) {
        step();
        if ((spins & 255u) == 0) {
            every();
            if (deadline.expired())
                late();
        }
    }
}
template <class Done, class Step, class Late>
void spin_until(Deadline deadline, Done&& done, Step&& step, Late&& late)
{
    spin_until(deadline, done, step, late, [] {});
}

/// Looks at `done()` until it is true (returns true) or `deadline` passes
/// (returns false), sleeping between looks: `first` at first, twice as long
/// each time after, up to `most`. For what no descriptor announces (a file
/// another process writes, a child's exit, a count another thread lowers).
template <class Done>
bool nap_until(Deadline deadline, Done&& done, std::chrono::milliseconds first,
               std::chrono::milliseconds most = {})
{
    auto pause = Clock::duration(first);
    const auto longest = Clock::duration(std::max(first, most));
    while (!done()) {
        if (deadline.expired())
            return false;
        std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
        pause = std::min(pause * 2, longest);
    }
    return true;
}

} // namespace weft::detail
