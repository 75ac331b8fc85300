// SPDX-License-Identifier: MIT
// Progress threads: each endpoint's thread (Progress::thread) pinned to the CPU
// asked for (Options::progress_cpu).
#include <catch2/catch.hpp>

#include <dirent.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/cases.hpp"

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
