// SPDX-License-Identifier: MIT
// A rank for tests/group.cpp's failure case: joins the group its environment
// names, meets the others at a barrier, and then either stalls (the rank in
// WEFT_TEST_VICTIM, which the test kills) or waits at a second barrier,
// which must end with an error naming the victim. Prints when (steady clock,
// ns) and what it got.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "weft/error.hpp"
#include "weft/group.hpp"

using namespace std::chrono_literals;

int main()
{
    const char* v = std::getenv("WEFT_TEST_VICTIM");
    const auto victim = static_cast<std::uint32_t>(v ? std::atoi(v) : 1);
    try {
        weft::Group g = weft::Group::from_environment({}, weft::Deadline::after(60s));
        g.barrier(weft::Deadline::after(60s));
        if (g.rank() == victim) {
            fmt::print("READY\n");
            std::fflush(stdout);
            std::this_thread::sleep_for(120s); // killed before this ends
            return 3;
        }
        g.barrier(weft::Deadline::after(60s));
        fmt::print("rank {}: the barrier returned though rank {} never came\n", g.rank(), victim);
        return 1;
    } catch (const weft::Error& e) {
        const auto at = std::chrono::steady_clock::now().time_since_epoch();
        fmt::print("AT {} LOST {} {}\n", std::chrono::duration_cast<std::chrono::nanoseconds>(at).count(),
                   e.peer_lost() ? 1 : 0, e.what());
        // "rank(s) 5, 7 left": the victim, maybe with survivors that have
        // already left on the same error.
        const std::string what = e.what();
        const auto from = what.find("rank(s) ");
        const auto to = what.find(" left", from);
        bool named = false;
        if (from != std::string::npos && to != std::string::npos)
            named = (", " + what.substr(from + 8, to - from - 8) + ",")
                        .find(fmt::format(" {},", victim)) != std::string::npos;
        return e.peer_lost() && named ? 0 : 2;
    }
}
