// SPDX-License-Identifier: MIT
// weft-pingpong: the RMA ping-pong as a standalone program. `weft pingpong`
// runs the same code.
#include <exception>
#include <iostream>

#include "pingpong.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"weft RMA ping-pong: both ends on this machine by default, or --server / "
                 "--connect across two processes or machines"};
    weft::pingpong::Config config;
    weft::pingpong::add_options(app, config);
    CLI11_PARSE(app, argc, argv);
    try {
        return weft::pingpong::run(config);
    } catch (const std::exception& e) {
        std::cerr << "weft-pingpong: " << e.what() << "\n";
        return 1;
    }
}
