// SPDX-License-Identifier: MIT
// The `weft` program: the RMA ping-pong and the tools around it.
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

#include "info.hpp"
#include "weft_ends.hpp"
#include "pingpong.hpp"
#include "weft/base/version.hpp"

namespace {

/// CLI11 says only "A subcommand is required" for a word that names none:
/// name the word and the subcommands instead. The top level takes flags only
/// (--help, --version), so the first other word must be a subcommand.
/// Returns the exit status to leave with, or -1 to go on.
int check_subcommand(const CLI::App& app, int argc, char** argv)
{
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({}))
        names += (names.empty() ? "" : ", ") + sub->get_name();
    for (int i = 1; i < argc; ++i) {
        const std::string word = argv[i];
        if (word == "-h" || word == "--help" || word == "--version")
            return -1;
        if (word.rfind('-', 0) == 0) {
            std::fprintf(stderr, "weft: unknown option '%s'; before the subcommand weft takes "
                                 "only --help and --version (weft SUBCOMMAND --help lists the "
                                 "subcommand's options)\n",
                         word.c_str());
            return static_cast<int>(CLI::ExitCodes::ExtrasError);
        }
        for (const CLI::App* sub : app.get_subcommands({}))
            if (sub->check_name(word))
                return -1;
        std::fprintf(stderr, "weft: unknown subcommand '%s'; the subcommands are: %s (weft --help "
                             "says what each does)\n",
                     word.c_str(), names.c_str());
        return static_cast<int>(CLI::ExitCodes::ExtrasError);
    }
    std::fprintf(stderr, "weft: a subcommand is required: %s (weft --help says what each does)\n",
                 names.c_str());
    return static_cast<int>(CLI::ExitCodes::RequiredError);
}

} // namespace

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

    weft::tool::InfoOptions info_options;
    auto* info = app.add_subcommand("info", "providers, fabrics, domains and RDMA devices on this "
                                            "machine, and the order weft chooses in");
    info->add_flag("--json", info_options.json, "machine-readable output");
    info->add_option("-p,--provider", info_options.provider,
                     "only this provider and the stacks over it (-p tcp: tcp and tcp;ofi_rxm)");

    weft::tool::DoctorOptions doctor;
    auto* doc = app.add_subcommand("doctor", "preflight checks with verdicts and fixes; exit status "
                                             "0 when weft can run RDMA here");
    doc->add_flag("--json", doctor.json, "machine-readable output");
    doc->add_option("--shm-peer", doctor.shm_peer,
                    "also check cross-memory attach (shm) to this process id")
        ->check(CLI::Range(1, std::numeric_limits<int>::max()))
        ->type_name("PID");
    doc->add_option("--ranks", doctor.ranks,
                    "also check what a group of N ranks needs here (open files, FI_UNIVERSE_SIZE)")
        ->check(CLI::Range(1u, 1u << 24))
        ->type_name("N");

    weft::bench::Config bench;
    auto* bn = app.add_subcommand("bench", "latency, bandwidth, message rate and IOPS of RMA "
                                           "patterns; against raw libfabric: ./weft.sh bench "
                                           "transport in weft's source tree builds the "
                                           "baseline and runs both (bench/compare.py)");
    weft::bench::add_options(*bn, bench);

    weft::tool::StoreOptions store;
    auto* st = app.add_subcommand("store", "serve a TCP rendezvous store for groups of weft "
                                           "processes (members set WEFT_STORE=host:port)");
    st->add_option("--listen", store.listen, "where to listen: [host:]port (port 0 picks one)")
        ->required()
        ->type_name("[HOST:]PORT");

    if (const int status = check_subcommand(app, argc, argv); status >= 0)
        return status;
    CLI11_PARSE(app, argc, argv);
    try {
        if (*pp)
            return weft::pingpong::run(pingpong);
        if (*info)
            return weft::tool::info(info_options);
        if (*doc)
            return weft::tool::doctor(doctor);
        if (*bn)
            return weft::bench::run(bench, weft::bench::weft_factory());
        if (*st)
            return weft::tool::store(store);
    } catch (const std::exception& e) {
        std::cerr << "weft: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
