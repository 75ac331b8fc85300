// SPDX-License-Identifier: MIT
// The `weft` program: the RMA ping-pong and the tools around it.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "info.hpp"
#include "weft_bench.hpp"
#include "pingpong.hpp"
#include "weft/version.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"weft: one RMA API over libfabric on every fabric"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("weft ") + weft::version);

    weft::pingpong::Config pingpong;
    auto* pp = app.add_subcommand("pingpong",
                                  "RMA ping-pong: both ends on this machine by default, or "
                                  "--server / --connect across processes or machines");
    weft::pingpong::add_options(*pp, pingpong);

    bool info_json = false;
    auto* info = app.add_subcommand("info", "providers, fabrics, domains and RDMA devices on this "
                                            "machine, and the order weft chooses in");
    info->add_flag("--json", info_json, "machine-readable output");

    weft::tool::DoctorOptions doctor;
    auto* doc = app.add_subcommand("doctor", "preflight checks with verdicts and fixes; exit status "
                                             "0 when weft can run RDMA here");
    doc->add_flag("--json", doctor.json, "machine-readable output");
    doc->add_option("--shm-peer", doctor.shm_peer,
                    "also check cross-memory attach (shm) to this process id");

    weft::bench::Config bench;
    auto* bn = app.add_subcommand("bench", "latency, bandwidth, message rate and IOPS of RMA "
                                           "patterns; compare with weft-raw-bench");
    weft::bench::add_options(*bn, bench);

    CLI11_PARSE(app, argc, argv);
    try {
        if (*pp)
            return weft::pingpong::run(pingpong);
        if (*info)
            return weft::tool::info(info_json);
        if (*doc)
            return weft::tool::doctor(doctor);
        if (*bn)
            return weft::bench::run(bench, weft::bench::weft_factory());
    } catch (const std::exception& e) {
        std::cerr << "weft: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
