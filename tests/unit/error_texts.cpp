// SPDX-License-Identifier: MIT
// Error texts: a failure's message names the call, the code, the provider and
// the fix, and mr_mode bits print by name.
#include <catch2/catch.hpp>

#include <rdma/fi_errno.h>

#include "check.hpp"
#include "weft/base/error.hpp"
#include "weft/info/info.hpp"

using namespace weft;

TEST_CASE("error texts name the call, the code, the provider and the fix", "[unit][errors]")
{
    const auto text = detail::format_failure("fi_mr_regattr", -FI_ENOMEM, "verbs", "registering 1 B");
    CHECK_THAT(text, Catch::StartsWith("fi_mr_regattr failed on verbs: Cannot allocate memory (-12)"));
    CHECK_THAT(text, Catch::Contains("registering 1 B") && Catch::Contains("RLIMIT_MEMLOCK"));

    const auto shm = detail::format_failure("RMA write", -FI_EPERM, "shm", "");
    CHECK_THAT(shm, Catch::Contains("ptrace") && Catch::Contains("ptrace_scope"));

    const auto verbs = detail::format_failure("fi_getinfo", -FI_ENODATA, "verbs", "");
    CHECK_THAT(verbs, Catch::Contains("/etc/hosts"));

    try {
        detail::throw_error("wait", -FI_ETIMEDOUT, "tcp", "no completion");
        FAIL("no throw");
    } catch (const TimeoutError& e) {
        CHECK(e.code() == -FI_ETIMEDOUT);
        CHECK(e.call() == "wait");
        CHECK(e.provider() == "tcp");
    }
}

TEST_CASE("mr_mode bits print by name", "[unit][traits]")
{
    CHECK(mr_mode_string(0) == "none");
    CHECK(mr_mode_string(FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_LOCAL) == "LOCAL|VIRT_ADDR|PROV_KEY");
}
