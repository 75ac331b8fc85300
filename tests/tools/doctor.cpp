// SPDX-License-Identifier: MIT
// weft doctor: each check provoked for real, in a child process whose
// environment has the problem, must produce its finding.
#include <catch2/catch.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "support/peer_process.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"

using nlohmann::json;

namespace {

struct Run {
    int status = -1;
    json out;
};

/// Runs a shell command line; its status, and its standard output as JSON.
Run run_json(const std::string& command)
{
    const weft::test::Ran ran = weft::test::run_shell(command);
    return {ran.status < 128 ? ran.status : -1, json::parse(ran.output, nullptr, false)};
}

std::string doctor() { return std::string(WEFT_CLI_PATH) + " doctor --json"; }

/// The findings of one check.
std::vector<json> findings(const Run& r, const std::string& check)
{
    std::vector<json> out;
    if (r.out.is_discarded())
        return out;
    for (const auto& f : r.out["findings"])
        if (f["check"] == check)
            out.push_back(f);
    return out;
}

/// Why this process cannot make a namespace of `kind` (unshare's flag), or nothing.
std::optional<std::string> no_namespace(const std::string& kind, const std::string& name)
{
    return weft::test::unless("unshare " + kind + " true",
                              "cannot create a " + name + " namespace here (needs root)");
}

/// The one finding of `check`.
json the_finding(const Run& r, const std::string& check)
{
    const auto f = findings(r, check);
    REQUIRE(f.size() == 1);
    return f[0];
}

/// weft doctor's findings from a shell that made a namespace of `kind`
/// (unshare's flag) and ran `setup` in it.
Run doctor_in(const std::string& kind, const std::string& setup)
{
    return run_json("unshare " + kind + " sh -c '" + setup + " && exec " + doctor() + "'");
}

} // namespace

TEST_CASE("doctor: the exit status says whether weft can run RDMA here", "[doctor]")
{
    const Run r = run_json(doctor());
    REQUIRE_FALSE(r.out.is_discarded());
    const bool rdma = r.out["rdma"];
    CHECK(r.status == (rdma ? 0 : 1));
    const auto devices = findings(r, "rdma devices");
    REQUIRE_FALSE(devices.empty());
    if (!rdma)
        CHECK(devices[0]["fix"].get<std::string>().find("rdma link add") != std::string::npos);
}

TEST_CASE("doctor: a low RLIMIT_MEMLOCK is found and its fix named", "[doctor]")
{
    // 64 KiB, soft and hard.
    const Run r = run_json("ulimit -l 64 && exec " + doctor());
    const json f = the_finding(r, "memlock");
    CHECK(f["verdict"] != "ok");
    CHECK_THAT(f["detail"].get<std::string>(), Catch::Contains("64 KiB"));
    CHECK_THAT(f["fix"].get<std::string>(), Catch::Contains("ulimit -l unlimited"));
}

TEST_CASE("doctor: a host name that does not resolve breaks rdma_cm", "[doctor]")
{
    WEFT_SKIP_IF(no_namespace("--uts", "UTS"));
    const json f = the_finding(doctor_in("--uts", "hostname weft-doctor-nowhere.invalid"), "rdma_cm");
    CHECK(f["verdict"] != "ok");
    CHECK_THAT(f["detail"].get<std::string>(),
               Catch::Contains("weft-doctor-nowhere.invalid") && Catch::Contains("does not resolve"));
    CHECK_THAT(f["fix"].get<std::string>(), Catch::Contains("/etc/hosts"));
}

TEST_CASE("doctor: loopback only, and container bridges, are found", "[doctor]")
{
    WEFT_SKIP_IF(no_namespace("--net", "network"));
    SECTION("only the loopback interface")
    {
        const auto f = findings(doctor_in("--net", "ip link set lo up"), "interfaces");
        REQUIRE_FALSE(f.empty());
        CHECK_THAT(f[0]["detail"].get<std::string>(), Catch::Contains("only the loopback"));
    }
    SECTION("a docker bridge the tcp provider may pick")
    {
        const auto f = findings(doctor_in("--net", "ip link set lo up && ip link add docker0 type "
                                                   "bridge && ip addr add 172.17.0.1/16 dev docker0 "
                                                   "&& ip link set docker0 up"),
                                "interfaces");
        REQUIRE_FALSE(f.empty());
        bool named = false;
        for (const auto& x : f)
            named |= x["detail"].get<std::string>().find("docker0 is up") != std::string::npos &&
                     x["fix"].get<std::string>().find("--domain") != std::string::npos;
        CHECK(named);
    }
}

TEST_CASE("doctor: shm without ptrace permission says so", "[doctor]")
{
    // A peer that is not dumpable may not be attached to without CAP_SYS_PTRACE:
    // run the doctor with that capability dropped, as an unprivileged user is.
    WEFT_SKIP_IF(weft::test::unless("setpriv --bounding-set -sys_ptrace true",
                                    "setpriv cannot drop CAP_SYS_PTRACE here"));
    // The undumpable program prints its pid.
    weft::test::PeerProcess peer(WEFT_UNDUMPABLE_PATH, {});
    int pid = 0;
    REQUIRE(std::sscanf(peer.first_line().c_str(), "%d", &pid) == 1);
    const Run r = run_json("setpriv --bounding-set -sys_ptrace --inh-caps -sys_ptrace " +
                            doctor() + " --shm-peer " + std::to_string(pid));
    peer.kill_now();
    const json f = the_finding(r, "ptrace/shm");
    CHECK(f["verdict"] == "FAIL");
    CHECK_THAT(f["detail"].get<std::string>(),
               Catch::Contains("Operation not permitted") && Catch::Contains(std::to_string(pid)));
    CHECK_THAT(f["fix"].get<std::string>(), Catch::Contains("ptrace_scope"));
}

TEST_CASE("doctor: a full /dev/shm is found", "[doctor]")
{
    WEFT_SKIP_IF(no_namespace("--mount", "mount"));
    const json f =
        the_finding(doctor_in("--mount", "mount -t tmpfs -o size=1m tmpfs /dev/shm"), "/dev/shm");
    CHECK(f["verdict"] == "warn");
    CHECK_THAT(f["detail"].get<std::string>(), Catch::Contains("1 MiB free"));
}

TEST_CASE("doctor: a group's open-file limit and FI_UNIVERSE_SIZE are checked against its ranks",
          "[doctor][group]")
{
    // Under `ulimit -n 256` (soft, and hard), 100 ranks fit, 1000 do not.
    const std::string base = "ulimit -n 256 && unset FI_UNIVERSE_SIZE && exec " +
                             std::string(WEFT_CLI_PATH) + " doctor --json --ranks ";
    CHECK(the_finding(run_json("bash -c '" + base + "100'"), "open files")["verdict"] == "ok");
    json f = the_finding(run_json("bash -c '" + base + "1000'"), "open files");
    CHECK(f["verdict"] == "FAIL");
    CHECK_THAT(f["detail"].get<std::string>(), Catch::Contains("256 (soft) / 256 (hard)"));
    CHECK_THAT(f["fix"].get<std::string>(), Catch::Contains("ulimit -n 1064"));
    // A universe smaller than the group is found and its fix named.
    const Run narrow = run_json("FI_UNIVERSE_SIZE=16 " + std::string(WEFT_CLI_PATH) +
                                 " doctor --json --ranks 100");
    f = the_finding(narrow, "universe size");
    CHECK(f["verdict"] == "warn");
    CHECK_THAT(f["fix"].get<std::string>(), Catch::Contains("FI_UNIVERSE_SIZE=100"));
    // Without --ranks, neither check runs.
    CHECK(findings(run_json(doctor()), "open files").empty());
}
