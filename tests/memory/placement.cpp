// SPDX-License-Identifier: MIT
// Placement: memory near the device (its NUMA node).
#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "traits.hpp"

using namespace weft;

TEST_CASE("placement: memory near the device", "[numa]")
{
    auto domain = test::domain_for({"tcp", EndpointKind::msg});
    auto mr = MemoryRegion::allocate(domain, 1 << 20, Access::local, nullptr, Placement::near_device);
    const int device = providers::numa_node(domain->info().get());
    const int got = mr->numa_node();
    INFO("device node " << device << ", memory on node " << got);
    CHECK(got >= 0); // the kernel reports where the pages are
    if (device >= 0)
        CHECK(got == device);
    else
        WARN("the device reports no NUMA node here (" << domain->info().domain_name()
                                                      << "): placement falls back to anywhere");
}
