// SPDX-License-Identifier: MIT
// weft-pair-bench: weft and the raw-libfabric baseline in one run, both
// connected at once, their timed blocks interleaved (ABBA...): each adjacent
// pair of blocks gives one weft/raw ratio, so the slow and fast moments of a
// noisy machine hit both alike. The ratio to judge weft's overhead by.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "raw_bench.hpp"
#include "weft_bench.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"weft-pair-bench: weft vs raw libfabric, interleaved block by block"};
    weft::bench::Config cfg;
    weft::bench::add_options(app, cfg);
    app.add_option("--blocks", cfg.pair_blocks, "block pairs per size (default 15)")
        ->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    try {
        return weft::bench::run_pair(cfg, weft::bench::weft_factory(), weft::bench::raw_factory());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-pair-bench: %s\n", e.what());
        return 1;
    }
}
