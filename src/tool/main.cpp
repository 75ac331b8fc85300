// SPDX-License-Identifier: MIT
// The `weft` program: the RMA ping-pong and the tools around it.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

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

    CLI11_PARSE(app, argc, argv);
    try {
        if (*pp)
            return weft::pingpong::run(pingpong);
    } catch (const std::exception& e) {
        std::cerr << "weft: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
