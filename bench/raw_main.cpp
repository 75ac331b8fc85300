// SPDX-License-Identifier: MIT
// weft-raw-bench: the benchmark patterns written directly against libfabric's C
// API (raw_setup.cpp, raw_patterns.cpp), the process_vm_writev ceiling of shm
// and the loopback socket ceiling of tcp (the harness's ceiling.cpp).
#include <cstdio>

#include <CLI/CLI.hpp>

#include "raw_bench.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"weft-raw-bench: weft bench's patterns written directly against libfabric's C API"};
    weft::bench::Config cfg;
    weft::bench::add_options(app, cfg);
    std::size_t cma = 0;
    app.add_option("--cma-ceiling", cma,
                   "instead: measure process_vm_writev of SIZE bytes between two processes");
    int echo_clients = 0;
    app.add_option("--tcp-echo-ceiling", echo_clients,
                   "instead: CLIENTS processes send queue-depth requests at once over loopback TCP "
                   "sockets, one server answers each with SIZE bytes (-s, first size; default 64)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (cma)
            return weft::bench::cma_ceiling(cma, cfg.budget);
        if (echo_clients)
            return weft::bench::tcp_echo_ceiling(echo_clients, cfg.sizes.empty() ? 64 : cfg.sizes[0],
                                                 app.count("--queue-depth") ? cfg.queue_depth : 1, cfg.budget);
        return weft::bench::run(cfg, weft::bench::raw_factory());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-raw-bench: %s\n", e.what());
        return 1;
    }
}
