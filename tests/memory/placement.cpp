// SPDX-License-Identifier: MIT
// Placement: memory near the device (its NUMA node), and progress threads
// pinned to the CPU asked for.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/cases.hpp"
#include "traits.hpp"

using namespace weft;

TEST_CASE("progress thread: pinned where asked", "[progress][threads]")
{
    test::Case c{"tcp", EndpointKind::msg};
    Options o;
    o.progress = Progress::thread;
    o.progress_cpu = 0;
    WEFT_REQUIRE_CELL(c, o);
    auto p = test::connect_pair(c, o);
    REQUIRE(p.client.endpoint().progress_thread());
    // The threads name and pin themselves as they start: look until both did.
    int pinned = 0;
    std::vector<std::string> cpus;
    for (const auto until = Deadline::after(std::chrono::seconds(5)); !until.expired();) {
        pinned = 0;
        cpus.clear();
        if (DIR* d = opendir("/proc/self/task")) {
            while (dirent* e = readdir(d)) {
                const std::string task = std::string("/proc/self/task/") + e->d_name;
                std::string comm;
                std::ifstream(task + "/comm") >> comm;
                if (comm != "weft-progress")
                    continue;
                std::ifstream status(task + "/status");
                for (std::string line; std::getline(status, line);)
                    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
                        cpus.push_back(line.substr(line.find_last_of(" \t") + 1));
                        pinned += cpus.back() == "0";
                    }
            }
            closedir(d);
        }
        if (pinned == 2)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    INFO("weft-progress threads allowed on CPUs: " << fmt::format("{}", fmt::join(cpus, " | ")));
    CHECK(pinned == 2); // one per endpoint of the pair
}

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
