// SPDX-License-Identifier: MIT
// What `weft bench` shows a new user (issue 34): the plot of a latency sweep
// (the median with bars to p99, every size labelled), no number of a loaded
// run printed as 0, and a --help that names no program the install lacks.
// Runs the built CLI (WEFT_CLI_PATH).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpus.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Run = weft::test::Exit;

/// Runs `args` after the CLI through sh, its stderr as `redirect` says.
Run cli(const std::string& args, const std::string& redirect = "2>&1")
{
    return weft::test::run_program(WEFT_CLI_PATH, args, redirect);
}

std::string contents(const fs::path& p)
{
    std::ifstream f(p);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// The whitespace-separated words of the table row for `bytes` (its first word).
std::vector<std::string> row_words(const std::string& table, const std::string& bytes)
{
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::vector<std::string> w{std::istream_iterator<std::string>(words),
                                   std::istream_iterator<std::string>()};
        if (!w.empty() && w[0] == bytes)
            return w;
    }
    return {};
}

} // namespace

TEST_CASE("tools: bench --plot draws the median with bars to p99 and labels every size",
          "[tools][cli][bench][plot]")
{
    WEFT_SKIP_IF(weft::test::unless("command -v gnuplot", "gnuplot is not installed"));
    const weft::test::TempDir scratch("weft-bench-plot");
    SECTION("a latency sweep: the median, bars from min to p99, said in the key")
    {
        // 8 and 4 KiB: autoscaled, gnuplot left the 4K at the axis' end out.
        const fs::path file = fs::path(scratch.path) / "lat.svg";
        const Run r = cli("bench lat-write -s 8,4k -n 20 --budget-ms 20 --plot " + file.string() +
                          " --plot-script");
        REQUIRE(r.status == 0);
        const std::string svg = contents(file);
        CHECK_THAT(svg, Catch::Contains(">8<") && Catch::Contains(">4K<"));
        CHECK_THAT(svg, Catch::Contains("median; bars from min to p99 of single iterations"));
        const std::string script = contents(file.string() + ".gp");
        CHECK_THAT(script, Catch::Contains("using 1:2:3:4 with yerrorlines") &&
                               Catch::Contains("# bytes median min p99"));
    }
    SECTION("a bandwidth sweep: the last size labelled too, one size on its own axis")
    {
        for (const auto& [sizes, last] : {std::pair{"8,64", ">64<"}, std::pair{"16", ">16<"}}) {
            INFO(sizes);
            const fs::path file = fs::path(scratch.path) / "bw.svg";
            const Run r = cli(std::string("bench bw-write -s ") + sizes +
                              " -n 20 --budget-ms 20 --plot " + file.string());
            REQUIRE(r.status == 0);
            CHECK_THAT(contents(file), Catch::Contains(last));
        }
    }
}

TEST_CASE("tools: bench on a loaded machine prints no number as 0", "[tools][cli][bench][cpus]")
{
    // Both ends on one CPU: each hop of the ping-pong waits for the other
    // end's time slice, milliseconds a transfer, as under a load of busy loops.
    WEFT_SKIP_IF(weft::test::unless("command -v taskset", "taskset (util-linux) is not installed"));
    const std::string one_cpu =
        "taskset -c " + std::to_string(weft::tool::allowed_cpus()[0]) + " " + WEFT_CLI_PATH;
    const std::string run = " bench lat-write -s 8 -n 20 --budget-ms 20";
    SECTION("the table: the rates as well as the spread")
    {
        const weft::test::Ran ran = weft::test::run_shell(one_cpu + run + " 2>/dev/null");
        REQUIRE(ran.status == 0);
        INFO(ran.output);
        // bytes iters total time MB/sec usec/xfer Mxfers/sec min median p99 p99.9
        const auto words = row_words(ran.output, "8");
        REQUIRE(words.size() == 11);
        for (std::size_t i = 4; i < words.size(); ++i) {
            INFO(words[i]);
            CHECK(std::stod(words[i]) > 0);
        }
    }
    SECTION("--json: every iteration took time")
    {
        const weft::test::Ran ran = weft::test::run_shell(one_cpu + run + " --json 2>/dev/null");
        REQUIRE(ran.status == 0);
        const json j = json::parse(ran.output.substr(ran.output.find('{')), nullptr, false);
        REQUIRE_FALSE(j.is_discarded());
        const json& row = j["rows"][0];
        CHECK(row["usec_per_xfer_min"].get<double>() > 0);
        CHECK(row["mxfers_per_s"].get<double>() > 0);
    }
}

TEST_CASE("tools: bench --help names no program the install lacks", "[tools][cli][bench]")
{
    const Run r = cli("bench --help");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, !Catch::Contains("weft-raw-bench"));
    CHECK_THAT(r.out, Catch::Contains("./weft.sh bench transport"));
}
