// SPDX-License-Identifier: MIT
// weft-test-cells: prints which cells of the provider matrix run on this
// machine and why the others are skipped. Fails when neither tcp nor shm can
// run: then the matrix would prove nothing.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/cases.hpp"

int main()
{
    using namespace weft;
    // WEFT_TEST_REQUIRE="verbs/MSG,..." names cells that must run (the lab sets it).
    const std::string required = std::getenv("WEFT_TEST_REQUIRE") ? std::getenv("WEFT_TEST_REQUIRE") : "";
    bool missing_required = false;
    bool baseline = false;
    int runnable = 0;
    const auto cells = test::matrix();
    for (const auto& c : cells) {
        const auto why = test::unavailable(c);
        if (!why) {
            ++runnable;
            baseline |= (c.provider == "tcp" || c.provider == "shm");
        }
        std::printf("  %-18s %s%s\n", c.label().c_str(), why ? "SKIPPED: " : "runs",
                    why ? why->c_str() : "");
        if (why && ("," + required + ",").find("," + c.label() + ",") != std::string::npos)
            missing_required = true;
    }
    std::printf("provider matrix: %d of %zu cells run here\n", runnable, cells.size());
    if (missing_required) {
        std::fprintf(stderr, "a required cell (%s) cannot run\n", required.c_str());
        return 1;
    }
    if (!required.empty())
        return 0;
    if (!baseline) {
        std::fprintf(stderr, "neither tcp nor shm can run here: the matrix proves nothing\n");
        return 1;
    }
    return 0;
}
