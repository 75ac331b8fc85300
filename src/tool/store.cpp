// SPDX-License-Identifier: MIT
// `weft store --listen [host:]port`: a TCP store server for groups whose
// members should not depend on rank 0 to hold the keys (a service whose
// members come and go), until SIGINT or SIGTERM.
#include "info.hpp"

#include <signal.h>

#include <charconv>
#include <cstdio>
#include <tuple>

#include <fmt/format.h>

#include "socket.hpp"
#include "weft/stores/tcp_store.hpp"

namespace weft::tool {

int store(const StoreOptions& options)
{
    std::string host = "0.0.0.0";
    std::uint16_t port = 0;
    if (options.listen.find(':') != std::string::npos) {
        std::tie(host, port) = split_host_port(options.listen); // UsageError when malformed
    } else {
        const char* text = options.listen.data();
        const char* last = text + options.listen.size();
        const auto [end, ec] = std::from_chars(text, last, port);
        if (ec != std::errc{} || end != last) {
            std::fprintf(stderr, "weft store: --listen takes [host:]port, not '%s'\n",
                         options.listen.c_str());
            return 2;
        }
    }
    // The signals that end the server are taken by sigwait, not by handlers.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr); // before the server's thread starts
    StoreServer server(host, port);
    fmt::print("weft store: serving on {}:{}; members connect with WEFT_STORE={} (stop with "
               "Ctrl-C or SIGTERM)\n",
               host, server.port(), server.address());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    fmt::print("weft store: stopping on signal {} with {} member(s) connected and {} key(s)\n",
               sig, server.members(), server.keys());
    return 0;
}

} // namespace weft::tool
