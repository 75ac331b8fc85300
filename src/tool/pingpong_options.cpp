// SPDX-License-Identifier: MIT
// The ping-pong's command line: `weft pingpong`'s options, into a Config.
#include <chrono>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "pingpong.hpp"
#include "size_options.hpp"
#include "traits.hpp"

namespace weft::pingpong {

using std::chrono::milliseconds;
using std::chrono::seconds;

void add_options(CLI::App& app, Config& cfg)
{
    // The ping-pong measures the provider it reports, co-located ends too: the
    // lane only when asked (--lane), or where WEFT_SAME_HOST decides.
    const char* same_host = std::getenv("WEFT_SAME_HOST");
    cfg.options.same_host =
        same_host != nullptr && *same_host != '\0' ? SameHost::automatic : SameHost::off;
    auto* server = app.add_option("--server", cfg.listen,
                                  "serve one client on [HOST:]PORT (side channel; the fabric "
                                  "listens on the same host)");
    auto* connect = app.add_option("--connect", cfg.connect, "connect to a server at HOST:PORT");
    server->excludes(connect);
    server->expected(0, 1);
    std::string known; // weft's provider records, in its order
    for (const providers::Traits* t : providers::all())
        known += (known.empty() ? "" : ", ") + std::string(t->name);
    app.add_option("-p,--provider", cfg.options.provider,
                   fmt::format("provider: {}, or a layered one such as tcp;ofi_rxm (default: "
                               "WEFT_PROVIDER, else automatic)",
                               known));
    app.add_flag_callback("--rdm", [&] { cfg.options.kind = EndpointKind::rdm; },
                          "reliable-datagram endpoints (default: the provider's fast path)");
    app.add_flag_callback("--msg", [&] { cfg.options.kind = EndpointKind::msg; },
                          "connection-oriented endpoints");
    app.add_flag_callback("--require-rdma", [&] { cfg.options.fallback = Fallback::require_rdma; },
                          "fail instead of falling back to a non-RDMA provider");
    app.add_flag("--shm", cfg.options.allow_shm,
                 "allow shared memory (both ends on this host)");
    app.add_flag_callback("--lane", [&] { cfg.options.same_host = SameHost::lane; },
                          "the same-host lane between co-located ends (Options::same_host; "
                          "default: the provider carries them, unless WEFT_SAME_HOST says)");
    app.add_option("--domain", cfg.options.domain, "pin a domain / interface (lo, eth0, rxe0)");
    app.add_option("--bind", cfg.options.node, "local address the fabric binds to");
    app.add_option_function<std::string>(
           "--op",
           [&](const std::string& v) {
               if (v == "write")
                   cfg.op = Pattern::write;
               else if (v == "read")
                   cfg.op = Pattern::read;
               else
                   throw CLI::ValidationError("--op", "write or read");
           },
           "write (write_notify there and back, default) or read (RMA read, passive target)");
    app.add_option_function<std::string>(
           "--progress",
           [&](const std::string& v) {
               if (v == "auto")
                   cfg.options.progress = Progress::automatic;
               else if (v == "polling")
                   cfg.options.progress = Progress::polling;
               else if (v == "thread")
                   cfg.options.progress = Progress::thread;
               else
                   throw CLI::ValidationError("--progress", "auto, polling or thread");
           },
           "who drives progress: polling (default: both ends poll), auto, thread");
    tool::add_size_option(app, "--min-size", cfg.min_size, "smallest transfer, e.g. 64k (default 8)");
    tool::add_size_option(app, "--max-size", cfg.max_size, "largest transfer, e.g. 4m (default 1m)");
    tool::add_count_option(app, "-n,--iters", cfg.iterations,
                           "iterations per size, at most (default 1000)");
    app.add_option_function<int>(
           "--budget-ms", [&](int v) { cfg.budget = milliseconds(v); },
           "time per size, at most (default 500)")
        ->check(CLI::Range(1, 3'600'000).description(""))
        ->type_name("MS");
    app.add_flag("--pin", cfg.pin,
                 "both ends on this machine: the server on the first CPU this process may use, "
                 "the client on the second");
    app.add_flag_callback("--no-verify", [&] { cfg.verify = false; },
                          "do not check the data (it is checked by default)");
    app.add_option_function<int>(
           "--timeout", [&](int v) { cfg.timeout = seconds(v); },
           "seconds any single wait may take (default 30)")
        ->check(CLI::Range(1, 86'400).description(""))
        ->type_name("SECONDS");
    app.add_flag("-q,--quiet", cfg.quiet, "print nothing on success");
    app.callback([&, server, connect] {
        if (*server)
            cfg.role = Role::server;
        else if (*connect)
            cfg.role = Role::client;
        if (cfg.min_size > cfg.max_size)
            throw CLI::ValidationError(
                "--min-size", fmt::format("{} B is more than --max-size ({} B)", cfg.min_size,
                                          cfg.max_size));
        if (cfg.pin && cfg.role != Role::both)
            throw CLI::ValidationError("--pin", "places both ends of a run on this machine; "
                                                "with --server or --connect, start each end "
                                                "under `taskset -c CPU`");
    });
}

} // namespace weft::pingpong
