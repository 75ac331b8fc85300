// SPDX-License-Identifier: MIT
// weft-pair-bench: weft and the raw-libfabric baseline in one run, both
// connected at once, their timed blocks interleaved (ABBA...): each adjacent
// pair of blocks gives one weft/raw ratio, so the slow and fast moments of a
// noisy machine hit both alike. The ratio to judge weft's overhead by; with
// --against, two of weft's paths (e.g. tcp MSG against net RDM) instead.
#include <cstdio>
#include <exception>
#include <optional>

#include <CLI/CLI.hpp>

#include "raw_bench.hpp"
#include "weft_ends.hpp"

int main(int argc, char** argv)
{
    CLI::App app{"weft-pair-bench: weft vs raw libfabric, interleaved block by block"};
    weft::bench::Config cfg;
    weft::bench::add_options(app, cfg);
    app.add_option("--blocks", cfg.pair_blocks, "block pairs per size (default 15)")
        ->check(CLI::Range(1, 1000));
    std::string against;
    app.add_option("--against", against,
                   "instead of raw libfabric: weft over this provider (e.g. net, "
                   "'tcp;ofi_rxm'), to pair two paths (-p, --rdm, --msg: the first path)");
    bool against_rdm = false;
    app.add_flag("--against-rdm", against_rdm, "the --against path uses RDM endpoints");
    bool against_lane = false;
    app.add_flag("--against-lane", against_lane,
                 "the --against path takes the same-host lane (--lane: the first path)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (!against.empty()) {
            weft::bench::Config other = cfg;
            other.provider = against;
            other.kind = against_rdm ? std::optional(weft::EndpointKind::rdm) : std::nullopt;
            other.lane = against_lane;
            weft::bench::Factory a = weft::bench::weft_factory(), b = weft::bench::weft_factory();
            a.label = (cfg.provider.empty() ? std::string("weft") : cfg.provider) +
                      (cfg.lane ? "+lane" : "");
            b.label = against + (against_lane ? "+lane" : "");
            return weft::bench::run_pair(cfg, a, other, b);
        }
        return weft::bench::run_pair(cfg, weft::bench::weft_factory(), cfg,
                                     weft::bench::raw_factory());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-pair-bench: %s\n", e.what());
        return 1;
    }
}
