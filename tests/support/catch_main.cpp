// SPDX-License-Identifier: MIT
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>

#include "support/cases.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/base/detail/fid.hpp"

namespace {

// After every test case, every fid weft opened must be closed again: libfabric
// itself leaks a little (so LeakSanitizer ignores it), weft must not.
struct FidLeakCheck : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseEnded(const Catch::TestCaseStats& stats) override
    {
        // An abandoned endpoint (a progress thread stuck inside the provider)
        // leaves its objects open on purpose, and says so on stderr; so do
        // the objects a test buries under a thread stuck the same way.
        if (const auto n = weft::detail::live_fids();
            n != 0 && weft::Endpoint::abandoned() == 0 && weft::test::buried() == 0) {
            std::fprintf(stderr, "weft: %zu libfabric objects still open after \"%s\"\n", n,
                         stats.testInfo.name.c_str());
            std::exit(3);
        }
    }
};

} // namespace

CATCH_REGISTER_LISTENER(FidLeakCheck)
