// SPDX-License-Identifier: MIT
// weft-wireup: a weft group's wire-up, as weft-wireup-raw does it by hand:
// Group::from_environment (PMIx under mpirun, or WEFT_STORE/RANK/SIZE for
// the TCP store), then one message around the ring (every rank reached its
// neighbour), then a barrier. Rank 0 prints its times. Argument: the
// provider (default tcp;ofi_rxm, RDM, as the reference).
#include <weft/group.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double ms(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}

} // namespace

int main(int argc, char** argv)
{
    const auto start = Clock::now();
    try {
        weft::Options o;
        o.provider = argc > 1 ? argv[1] : "tcp;ofi_rxm";
        o.kind = std::strchr(o.provider.c_str(), ';') ? weft::EndpointKind::rdm
                                                      : weft::EndpointKind::msg;
        o.node = "127.0.0.1";
        weft::Group g = weft::Group::from_environment(o, weft::Deadline::after(300s));
        const auto joined = Clock::now();
        weft::Node& node = g.node();
        auto src = node.allocate(64, weft::Access::local);
        int ctx = 0;
        if (g.size() > 1) {
            node.send(g.peer((g.rank() + 1) % g.size()), src->slice(0, 64), &ctx);
            (void)node.wait_for(weft::Op::recv, weft::Deadline::after(120s));
            (void)node.wait(&ctx, weft::Deadline::after(120s));
        }
        const auto reached = Clock::now();
        g.barrier(weft::Deadline::after(120s));
        if (g.rank() == 0) {
            // The store's own cost: one request without waiting (a key that
            // is there), times the requests a rank made to join (3 of rank
            // 0's keys, its own 2, the others' addresses, the barrier's 2).
            constexpr int probes = 100;
            const auto t = Clock::now();
            for (int i = 0; i < probes; ++i)
                (void)g.store().contains("weft/node/0");
            const double request_ms = ms(t, Clock::now()) / probes;
            const double requests = 3 + 2 + (g.size() - 1) + 2;
            std::printf("weft group on %s, %u ranks through the %s: joined %.1f ms, ring %.1f ms, "
                        "to reached %.1f ms after main; a store request %.3f ms, ~%.0f of them "
                        "to join: %.1f ms (%.2f %% of reaching)\n",
                        std::string(node.provider()).c_str(), g.size(), g.store().describe().c_str(),
                        ms(start, joined), ms(joined, reached), ms(start, reached), request_ms,
                        requests, request_ms * requests,
                        100 * request_ms * requests / ms(start, reached));
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-wireup: %s\n", e.what());
        return 1;
    }
}
