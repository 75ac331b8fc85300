// SPDX-License-Identifier: MIT
// weft-raw-bench: the benchmark patterns written directly against libfabric's C
// API (raw_setup.cpp, raw_patterns.cpp), and the process_vm_writev ceiling of
// shm (the harness's cma_ceiling).
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
    CLI11_PARSE(app, argc, argv);
    try {
        if (cma)
            return weft::bench::cma_ceiling(cma, cfg.budget);
        return weft::bench::run(cfg, weft::bench::raw_factory());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-raw-bench: %s\n", e.what());
        return 1;
    }
}
