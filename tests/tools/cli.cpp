// SPDX-License-Identifier: MIT
// The `weft` program as a new user meets it: bad input named with its fix,
// the bench's latency spread, pinning and the oversubscription warning,
// plots in the format asked for, doctor's --shm-peer and info's one line
// per domain. Runs the built CLI (WEFT_CLI_PATH).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cpus.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Run = weft::test::Exit;

/// Runs `args` after the CLI through sh; `redirect` says where its streams go
/// ("2>&1": both captured).
Run cli(const std::string& args, const std::string& redirect = "2>&1")
{
    return weft::test::run_program(WEFT_CLI_PATH, args, redirect);
}

/// The last line of `text` that parses as JSON.
json last_json(const std::string& text)
{
    json j = json::parse(text.substr(text.rfind("\n{") == std::string::npos
                                         ? text.find('{')
                                         : text.rfind("\n{") + 1),
                         nullptr, false);
    return j;
}

std::string head(const fs::path& p, std::size_t n)
{
    std::ifstream f(p, std::ios::binary);
    std::string s(n, '\0');
    f.read(s.data(), static_cast<std::streamsize>(n));
    s.resize(static_cast<std::size_t>(f.gcount()));
    return s;
}

std::set<std::string> names_in(const fs::path& dir)
{
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
        out.insert(e.path().filename().string());
    return out;
}

constexpr const char* quick = "-n 20 --budget-ms 20";

} // namespace

TEST_CASE("tools: an unknown subcommand is named, with the subcommands", "[tools][cli]")
{
    const Run r = cli("bogus");
    CHECK(r.status > 0);
    CHECK_THAT(r.out, Catch::Contains("unknown subcommand 'bogus'") &&
                          Catch::Contains("pingpong") && Catch::Contains("bench") &&
                          Catch::Contains("doctor") && Catch::Contains("info"));
    CHECK_THAT(cli("--bogus").out, Catch::Contains("unknown option '--bogus'"));
    CHECK_THAT(cli("").out, Catch::Contains("a subcommand is required"));
    CHECK(cli("--version").status == 0);
    CHECK(cli("info --help").status == 0);
}

TEST_CASE("tools: bench sizes are parsed whole or refused by name", "[tools][cli][sizes]")
{
    SECTION("garbage in a list: an error naming --sizes and the item, not an abort")
    {
        const Run r = cli("bench -s 8,foo " + std::string(quick));
        CHECK(r.status > 0);
        CHECK_THAT(r.out, Catch::Contains("--sizes") && Catch::Contains("'foo'") &&
                              Catch::Contains("64k"));
        CHECK_THAT(r.out, !Catch::Contains("terminate called"));
    }
    SECTION("a fraction of a byte")
    {
        const Run r = cli("bench -s 1.5 " + std::string(quick));
        CHECK(r.status > 0);
        CHECK_THAT(r.out, Catch::Contains("--sizes") && Catch::Contains("whole number of bytes"));
    }
    SECTION("kb and fractions of a unit run at the size they name")
    {
        const Run r = cli("bench lat-read -s 4kb,1.5k " + std::string(quick) + " --json");
        REQUIRE(r.status == 0);
        const json j = last_json(r.out);
        REQUIRE_FALSE(j.is_discarded());
        REQUIRE(j["rows"].size() == 2);
        CHECK(j["rows"][0]["bytes"] == 4096);
        CHECK(j["rows"][1]["bytes"] == 1536);
    }
}

TEST_CASE("tools: pingpong sizes take units", "[tools][cli][sizes]")
{
    const Run r = cli("pingpong --min-size 32k --max-size 64k " + std::string(quick));
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("\n32k ") && Catch::Contains("\n64k "));
    const Run bad = cli("pingpong --max-size 1.5");
    CHECK(bad.status > 0);
    CHECK_THAT(bad.out, Catch::Contains("--max-size") && Catch::Contains("'1.5'") &&
                            !Catch::Contains("1797693")); // no DBL_MAX in full
    CHECK_THAT(cli("pingpong -n foo").out, Catch::Contains("--iters") && !Catch::Contains("1797693"));
    CHECK_THAT(cli("pingpong --min-size 2k --max-size 1k").out,
               Catch::Contains("--min-size") && Catch::Contains("--max-size"));
}

TEST_CASE("tools: bench reports min, median, p99 and p99.9 of the latency patterns",
          "[tools][cli][bench]")
{
    for (const char* pattern : {"lat-write", "lat-read", "lat-notify"}) {
        INFO(pattern);
        const Run r = cli(std::string("bench ") + pattern + " -s 8 -n 200 --budget-ms 200 --json",
                           "2>/dev/null");
        REQUIRE(r.status == 0);
        const json j = last_json(r.out);
        REQUIRE_FALSE(j.is_discarded());
        const json& row = j["rows"][0];
        REQUIRE(row.contains("usec_per_xfer_min"));
        const double min = row["usec_per_xfer_min"], median = row["usec_per_xfer_median"],
                     p99 = row["usec_per_xfer_p99"], p999 = row["usec_per_xfer_p99_9"],
                     mean = row["usec_per_xfer"];
        CHECK(min > 0);
        CHECK(min <= median);
        CHECK(median <= p99);
        CHECK(p99 <= p999);
        // At most 1000 iterations: p99.9 is the slowest one, and the mean lies
        // between the extremes (the iteration times add up to the round's).
        REQUIRE(row["iterations"].get<int>() <= 1000);
        CHECK(min <= mean * 1.01);
        CHECK(mean <= p999 * 1.01);
    }
    const Run table = cli("bench lat-write -s 8,64 " + std::string(quick), "2>/dev/null");
    REQUIRE(table.status == 0);
    CHECK_THAT(table.out, Catch::Contains("median") && Catch::Contains("p99.9"));
}

TEST_CASE("tools: --pin puts each end on a CPU of its own", "[tools][cli][cpus]")
{
    const auto cpus = weft::tool::allowed_cpus();
    const Run r = cli("pingpong --pin --max-size 8 " + std::string(quick));
    REQUIRE(r.status == 0);
    if (cpus.size() < 2) {
        CHECK_THAT(r.out, Catch::Contains("--pin needs two CPUs"));
    } else {
        CHECK_THAT(r.out, Catch::Contains(fmt::format("server on CPU {}, client on CPU {}",
                                                      cpus[0], cpus[1])));
    }
    CHECK_THAT(cli("pingpong --pin --connect 127.0.0.1:1").out,
               Catch::Contains("--pin") && Catch::Contains("taskset"));
    CHECK_THAT(cli("bench --pin --connect 127.0.0.1:1").out,
               Catch::Contains("--pin") && Catch::Contains("taskset"));
}

TEST_CASE("tools: both tools warn when the ends have too few CPUs", "[tools][cli][cpus]")
{
    WEFT_SKIP_IF(weft::test::unless("command -v taskset", "taskset (util-linux) is not installed"));
    const std::string one_cpu = "taskset -c " + std::to_string(weft::tool::allowed_cpus()[0]) + " ";
    for (const std::string args : {"pingpong --max-size 8", "bench lat-write -s 8"}) {
        INFO(args);
        // Only stderr, and the run still succeeds.
        const Run r = weft::test::exit_of(one_cpu + WEFT_CLI_PATH + " " + args + " " + quick + " 2>&1 >/dev/null");
        CHECK(r.status >= 0); // not killed by a signal
        CHECK(r.status == 0);
        CHECK_THAT(r.out, Catch::Contains("warning: 2 busy-polling ends and 1 CPU"));
    }
}

TEST_CASE("tools: bench --plot writes the format its extension names, and nothing else",
          "[tools][cli][plot]")
{
    const weft::test::TempDir scratch("weft-tools");
    const fs::path dir = scratch.path;
    SECTION("a directory that does not exist is named, before the run")
    {
        const std::string file = (dir / "missing" / "p.png").string();
        const Run r = cli("bench bw-write -s 8 " + std::string(quick) + " --plot " + file);
        CHECK(r.status > 0);
        CHECK_THAT(r.out, Catch::Contains("does not exist") &&
                              Catch::Contains((dir / "missing").string()) &&
                              !Catch::Contains("gnuplot failed"));
        CHECK_THAT(r.out, !Catch::Contains("MB/sec")); // refused before running
    }
    SECTION("an unknown extension is refused with the ones known")
    {
        const Run r = cli("bench -s 8 --plot " + (dir / "p.txt").string());
        CHECK(r.status > 0);
        CHECK_THAT(r.out, Catch::Contains("'.txt'") && Catch::Contains(".png") &&
                              Catch::Contains(".svg") && Catch::Contains(".pdf"));
    }
    WEFT_SKIP_IF(weft::test::unless("command -v gnuplot", "gnuplot is not installed"));
    SECTION("png, jpg, pdf and svg, and no script or data left behind")
    {
        const std::pair<const char*, std::string> formats[] = {
            {"p.png", "\x89PNG"}, {"p.jpg", "\xFF\xD8\xFF"}, {"p.pdf", "%PDF"}, {"p.svg", "<?xml"}};
        for (const auto& [name, magic] : formats) {
            INFO(name);
            const fs::path file = dir / name;
            const Run r = cli("bench bw-write -s 8,4k " + std::string(quick) + " --plot " +
                               file.string());
            if (r.out.find("cannot write") != std::string::npos) {
                WARN("this gnuplot cannot write " << name << ": " << r.out);
                continue;
            }
            REQUIRE(r.status == 0);
            CHECK(head(file, magic.size()) == magic);
        }
        for (const auto& n : names_in(dir))
            CHECK_THAT(n, !Catch::EndsWith(".gp") && !Catch::EndsWith(".dat"));
    }
    SECTION("the sizes on the x axis read as K and M")
    {
        const fs::path file = dir / "sweep.svg";
        const Run r = cli("bench bw-write -s 8,128k,256k,1m,4m -n 4 --budget-ms 20 --plot " +
                           file.string() + " --plot-script");
        REQUIRE(r.status == 0);
        std::ifstream f(file);
        const std::string svg{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
        CHECK_THAT(svg, Catch::Contains(">128K<") && Catch::Contains(">256K<") &&
                            Catch::Contains(">4M<"));
        CHECK_THAT(svg, !Catch::Contains(">262144<") && !Catch::Contains(">4194304<"));
        // Kept on request: the script, with the data in it.
        CHECK(names_in(dir) == std::set<std::string>{"sweep.svg", "sweep.svg.gp"});
    }
}

TEST_CASE("tools: doctor --shm-peer with a PID that names no process says so", "[tools][cli][doctor]")
{
    weft::test::Process ended({{"true"}}, "true");
    const pid_t child = ended.pid();
    REQUIRE(child > 0);
    REQUIRE(ended.finish() == 0); // reaped: the PID names no process now
    const Run r = cli("doctor --json --shm-peer " + std::to_string(child), "2>/dev/null");
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    bool found = false;
    for (const auto& f : j["findings"]) {
        if (f["check"] != "ptrace/shm")
            continue;
        found = true;
        CHECK_THAT(f["detail"].get<std::string>(),
                   Catch::Contains("no process with PID " + std::to_string(child)));
        CHECK_THAT(f["fix"].get<std::string>(), !Catch::Contains("ptrace_scope"));
    }
    CHECK(found);
    CHECK_THAT(cli("doctor --shm-peer -5").out, Catch::Contains("--shm-peer"));
}

TEST_CASE("tools: info lists one line per provider, endpoint and domain", "[tools][cli][info]")
{
    const Run r = cli("info --json", "2>/dev/null");
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    REQUIRE_FALSE(j["providers"].empty());
    std::set<std::tuple<std::string, std::string, std::string>> seen;
    for (const auto& p : j["providers"]) {
        INFO(p.dump());
        CHECK(seen.emplace(p["provider"], p["endpoint"], p["domain"]).second);
        REQUIRE(p["fabrics"].is_array());
        CHECK_FALSE(p["fabrics"].empty());
        const std::set<std::string> fabrics(p["fabrics"].begin(), p["fabrics"].end());
        CHECK(fabrics.size() == p["fabrics"].size());
    }
}

TEST_CASE("tools: info -p shows one provider and the stacks over it", "[tools][cli][info]")
{
    const Run all = cli("info --json", "2>/dev/null");
    const json every = json::parse(all.out, nullptr, false);
    REQUIRE_FALSE(every.is_discarded());
    const std::string name = every["providers"][0]["provider"];
    const std::string core = name.substr(0, name.find(';'));
    const Run r = cli("info --json -p " + core, "2>/dev/null");
    REQUIRE(r.status == 0);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(j["providers"].empty());
    CHECK(j["providers"].size() < every["providers"].size());
    for (const auto& key : {"providers", "order"})
        for (const auto& p : j[key]) {
            const std::string n = p["provider"];
            INFO(n);
            CHECK((n == core || n.rfind(core + ";", 0) == 0 ||
                   n.find(";" + core) != std::string::npos));
        }
    const Run none = cli("info -p no-such-provider");
    CHECK(none.status == 1);
    CHECK_THAT(none.out, Catch::Contains("no provider 'no-such-provider'") &&
                             Catch::Contains(core));
}

TEST_CASE("tools: on sockets weft makes the provider's progress threads sleep once idle, unless "
          "the user chose how long they spin",
          "[tools][cli][sockets]")
{
    // libfabric reads FI_SOCKETS_PE_WAITTIME when it initialises: weft sets it
    // before, and says so in the selection's report.
    const std::string run = "pingpong -p sockets --max-size 8 -n 20";
    const Run r = weft::test::exit_of("env -u FI_SOCKETS_PE_WAITTIME " + std::string(WEFT_CLI_PATH) + " " + run + " 2>&1");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("set up:") && Catch::Contains("FI_SOCKETS_PE_WAITTIME=0"));
    const Run mine = weft::test::exit_of("FI_SOCKETS_PE_WAITTIME=2 " + std::string(WEFT_CLI_PATH) + " " + run + " 2>&1");
    INFO(mine.out);
    REQUIRE(mine.status == 0);
    CHECK_THAT(mine.out, !Catch::Contains("FI_SOCKETS_PE_WAITTIME"));
}
