// SPDX-License-Identifier: MIT
// The tools' shared pieces on their own: the size syntax every size option
// takes (src/tool/sizes.hpp) and the CPU oversubscription verdict
// (src/tool/cpus.hpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cpus.hpp"
#include "size_options.hpp"

using weft::tool::parse_size;
using weft::tool::parse_size_list;

namespace {

/// The message parse_size throws for `text`, or "" when it parses.
std::string refusal(const std::string& text)
{
    try {
        (void)parse_size(text);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

/// Parses `args` (after a program name) with one size option, one list
/// option and one count option; returns CLI11's message, or "" on success.
struct Parsed {
    std::string error;
    std::size_t size = 0;
    std::vector<std::size_t> list;
    std::uint64_t count = 0;
};
Parsed parse(std::vector<std::string> args)
{
    CLI::App app;
    Parsed p;
    weft::tool::add_size_option(app, "--max-size", p.size, "");
    weft::tool::add_size_list_option(app, "-s,--sizes", p.list, "");
    weft::tool::add_count_option(app, "-n,--iters", p.count, "");
    args.insert(args.begin(), "prog");
    std::vector<const char*> argv;
    for (const auto& a : args)
        argv.push_back(a.c_str());
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        p.error = e.what();
    }
    return p;
}

} // namespace

TEST_CASE("tools: sizes: plain bytes and k/m/g units, any case, powers of 1024", "[tools][sizes]")
{
    CHECK(parse_size("8") == 8);
    CHECK(parse_size("4096") == 4096);
    CHECK(parse_size("1k") == 1024);
    CHECK(parse_size("4kb") == 4096);
    CHECK(parse_size("4KB") == 4096);
    CHECK(parse_size("4KiB") == 4096);
    CHECK(parse_size("64K") == 65536);
    CHECK(parse_size("1m") == std::size_t{1} << 20);
    CHECK(parse_size("2MiB") == std::size_t{2} << 20);
    CHECK(parse_size("1g") == std::size_t{1} << 30);
    CHECK(parse_size("3g") == std::size_t{3} << 30);
    CHECK(parse_size("3GB") == std::size_t{3} << 30);
    CHECK(parse_size("16b") == 16);
    CHECK(parse_size(" 8 ") == 8);
    CHECK(parse_size("64 k") == 65536);
}

TEST_CASE("tools: sizes: a fraction only when it comes to whole bytes", "[tools][sizes]")
{
    CHECK(parse_size("1.5k") == 1536);
    CHECK(parse_size("0.5k") == 512);
    CHECK(parse_size("1.25m") == 1310720);
    CHECK(parse_size("0.0009765625m") == 1024); // 2^-10 MiB
    CHECK(parse_size("2.0") == 2);
    CHECK_THAT(refusal("1.5"), Catch::Contains("'1.5'") && Catch::Contains("whole number of bytes"));
    CHECK_THAT(refusal("0.1k"), Catch::Contains("whole number of bytes"));
    CHECK_THAT(refusal("1.0000000001g"), Catch::Contains("whole number of bytes"));
    CHECK_THAT(refusal("1."), Catch::Contains("not a size"));
}

TEST_CASE("tools: sizes: garbage, units and overflow are refused, naming the text", "[tools][sizes]")
{
    CHECK_THAT(refusal("foo"), Catch::Contains("'foo' is not a size"));
    CHECK_THAT(refusal(""), Catch::Contains("empty"));
    CHECK_THAT(refusal("-8"), Catch::Contains("not a size"));
    CHECK_THAT(refusal("4kx"), Catch::Contains("unknown unit 'kx'"));
    CHECK_THAT(refusal("4t"), Catch::Contains("unknown unit 't'"));
    CHECK_THAT(refusal("8 8"), Catch::Contains("unknown unit '8'"));
    const std::string max = std::to_string(std::numeric_limits<std::size_t>::max());
    CHECK(parse_size(max) == std::numeric_limits<std::size_t>::max());
    CHECK_THAT(refusal(max + "0"), Catch::Contains("too large"));
    CHECK_THAT(refusal("99999999999999999999999"), Catch::Contains("too large"));
    CHECK_THAT(refusal("17179869184g"), Catch::Contains("too large")); // 2^34 GiB = 2^64 B
    CHECK(parse_size("17179869183g") == std::size_t{17179869183} << 30);
}

TEST_CASE("tools: sizes: lists name the bad item and the list", "[tools][sizes]")
{
    CHECK(parse_size_list("8,4k,64k,1m") ==
          std::vector<std::size_t>{8, 4096, 65536, std::size_t{1} << 20});
    CHECK(parse_size_list("4kb") == std::vector<std::size_t>{4096});
    try {
        (void)parse_size_list("8,foo");
        FAIL("8,foo parsed");
    } catch (const std::invalid_argument& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("'foo'") && Catch::Contains("'8,foo'"));
    }
    CHECK_THROWS_AS(parse_size_list("8,,16"), std::invalid_argument);
    CHECK_THROWS_AS(parse_size_list("8,"), std::invalid_argument);
}

TEST_CASE("tools: sizes: options report the option, the value and the syntax", "[tools][sizes]")
{
    const Parsed ok = parse({"--max-size", "64k", "-s", "8,1.5k,3g", "-n", "1000"});
    REQUIRE(ok.error.empty());
    CHECK(ok.size == 65536);
    CHECK(ok.list == std::vector<std::size_t>{8, 1536, std::size_t{3} << 30});
    CHECK(ok.count == 1000);

    const Parsed bad = parse({"-s", "8,foo"});
    CHECK_THAT(bad.error, Catch::Contains("--sizes") && Catch::Contains("'foo'") &&
                              Catch::Contains("64k"));
    CHECK_THAT(parse({"--max-size", "1.5"}).error,
               Catch::Contains("--max-size") && Catch::Contains("'1.5'"));
    CHECK_THAT(parse({"--max-size", "0"}).error, Catch::Contains("less than 1"));
    CHECK_THAT(parse({"-s", "0,8"}).error, Catch::Contains("less than 1"));
    CHECK_THAT(parse({"-n", "foo"}).error, Catch::Contains("--iters") && Catch::Contains("'foo'"));
    CHECK_THAT(parse({"-n", "0"}).error, Catch::Contains("at least 1"));
    CHECK_THAT(parse({"-n", "1.5"}).error, Catch::Contains("'1.5'"));
}

TEST_CASE("tools: cpus: oversubscription is two ends on too few CPUs, or load", "[tools][cpus]")
{
    using weft::tool::oversubscription;
    // Two ends, two idle CPUs: no warning; a CPU's worth of other work: a warning.
    CHECK(oversubscription(2, 2, 2, 0.0).empty());
    CHECK(oversubscription(2, 2, 2, 0.4).empty());
    CHECK_THAT(oversubscription(2, 2, 2, 1.0),
               Catch::Contains("load average of 1.00") && Catch::Contains("--pin"));
    CHECK_THAT(oversubscription(2, 2, 2, 3.68), Catch::Contains("3.68"));
    // More ends than CPUs, whatever the load.
    CHECK_THAT(oversubscription(2, 1, 2, 0.0),
               Catch::Contains("2 busy-polling ends and 1 CPU") && Catch::Contains("taskset"));
    // One end alone on a busy machine.
    CHECK(oversubscription(1, 2, 2, 1.0).empty());
    CHECK_FALSE(oversubscription(1, 2, 2, 2.0).empty());
    // Load on CPUs this process may not use counts in proportion.
    CHECK(oversubscription(2, 4, 16, 8.0).empty());
    CHECK_FALSE(oversubscription(2, 4, 4, 8.0).empty());
    // One line.
    CHECK(oversubscription(2, 2, 2, 5.0).find('\n') == std::string::npos);
}

TEST_CASE("tools: cpus: the pinning plan uses CPUs this process may use", "[tools][cpus]")
{
    const auto allowed = weft::tool::allowed_cpus();
    REQUIRE_FALSE(allowed.empty());
    const auto plan = weft::tool::plan_pinning();
    if (allowed.size() < 2) {
        CHECK_FALSE(plan.cpus);
        CHECK_THAT(plan.why_not, Catch::Contains("two CPUs"));
        return;
    }
    REQUIRE(plan.cpus);
    CHECK(plan.cpus->server == allowed[0]);
    CHECK(plan.cpus->client == allowed[1]);
}
