// SPDX-License-Identifier: MIT
/// @brief The RMA ping-pong: weft's main job and its smallest complete program.
///
/// The client writes a buffer into the server's region with write_notify; the
/// server checks every byte, writes it back the same way, and the client checks
/// it again. Sizes sweep 8 B .. 1 MiB; output is fabtests-style columns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>


#include "weft/select/select.hpp"

namespace CLI {
class App;
} // namespace CLI

namespace weft::pingpong {

enum class Role { both, server, client };
enum class Pattern { write, read };

/// Both ends poll all the time, so the ping-pong drives progress itself
/// (Progress::polling); --progress auto|thread shows the cost of a progress thread.
inline Options default_options()
{
    Options o;
    o.progress = Progress::polling;
    return o;
}

struct Config {
    Role role = Role::both;
    std::string listen = "0.0.0.0:7471"; ///< server: side-channel [host:]port
    std::string connect;                 ///< client: server's host:port
    Options options = default_options();
    Pattern op = Pattern::write;
    std::size_t min_size = 8;
    std::size_t max_size = std::size_t{1} << 20;
    std::size_t iterations = 1000;                    ///< per size, at most
    std::chrono::milliseconds budget{500};            ///< per size, at most
    bool verify = true;
    std::chrono::seconds timeout{30};
    bool quiet = false;
    bool pin = false; ///< both ends here: each on a CPU of its own
};

/// Adds the ping-pong's command-line options to `app`.
void add_options(CLI::App& app, Config& config);

/// Runs the configured role(s). Returns the process exit status.
int run(const Config& config);

} // namespace weft::pingpong
