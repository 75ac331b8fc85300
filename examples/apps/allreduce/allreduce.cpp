// weft-allreduce: an all-reduce of floats over a group (allreduce.hpp), checked exactly at
// every size, then timed. Launch it as a group (mpirun, srun --mpi=pmix, or
// WEFT_STORE/WEFT_RANK/WEFT_SIZE); sizes in bytes, K and M allowed:
//   mpirun -np 4 weft-allreduce 1K 64K 4M 32M [--csv] [--yield: more ranks than cores]
//   [--check: sums checked, nothing timed] [--schedule=ring|halving: default the ring
//   for 3 ranks, else halving (Allreduce::best)] [--piece=BYTES: the ring's chunks passed
//   on in pieces; halving sends whole ranges]
// Rank 0 prints the time per call at each size; every rank whether its sums were right.
#include "allreduce.hpp"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

using namespace std::chrono_literals;

static const char* const usage =
    "usage: weft-allreduce [SIZE...] [--check] [--csv] [--yield] [--schedule=ring|halving] "
    "[--piece=BYTES]\n  SIZE: bytes, a multiple of 4 (a float), K, M or G allowed: 4 1K 64M";

/// "64K" -> 65536; anything else than digits and one unit, or a value past 2^40, is refused.
static std::size_t bytes_of(const std::string& s, const char* what)
{
    std::size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits])))
        ++digits;
    const std::string unit = s.substr(digits);
    const int shift = unit.empty() ? 0 : unit == "K" || unit == "k" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
    if (digits == 0 || digits > 12 || shift < 0)
        throw std::invalid_argument(std::string(what) + " '" + s + "' is not a number of bytes\n" + usage);
    const std::size_t n = std::stoull(s.substr(0, digits)); // at most 12 digits: no overflow
    if (n > (std::size_t{1} << 40) >> shift)
        throw std::invalid_argument(std::string(what) + " '" + s + "' is over 1 TiB\n" + usage);
    return n << shift;
}

int main(int argc, char** argv)
try {
    std::vector<std::size_t> sizes;
    bool csv = false, yield = false, time = true;
    std::size_t piece = 0; // whole chunks
    std::string schedule;  // Allreduce::best
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::cout << usage << std::endl;
            return 0;
        }
        if (a == "--csv")
            csv = true;
        else if (a == "--yield")
            yield = true;
        else if (a == "--check")
            time = false;
        else if (a.rfind("--piece=", 0) == 0)
            piece = bytes_of(a.substr(8), "--piece");
        else if (a.rfind("--schedule=", 0) == 0)
            schedule = a.substr(11);
        else if (a.rfind("-", 0) == 0)
            throw std::invalid_argument("unknown option '" + a + "'\n" + usage);
        else if (const std::size_t b = bytes_of(a, "the size"); b > 0 && b % sizeof(float) == 0)
            sizes.push_back(b);
        else
            throw std::invalid_argument("the size '" + a + "' is not a positive multiple of 4 bytes (a float)\n" + usage);
    }
    if (piece != 0 && piece < sizeof(float))
        throw std::invalid_argument("--piece is 0 (whole chunks) or at least 4 bytes (a float)");
    if (sizes.empty())
        sizes = {1 << 10, 64 << 10, 1 << 20, 4 << 20};
    const auto soon = [] { return weft::Deadline::after(120s); };
    // The ranks wait actively in every step: no progress thread; and where they outnumber
    // the cores (--yield), a waiting rank yields its core to the one it waits for.
    weft::Options o;
    o.progress = weft::Progress::polling;
    o.waiting = yield ? weft::Waiting::yield : weft::Waiting::spin;
    weft::Group g = weft::Group::from_environment(o, soon());
    const std::uint32_t n = g.size(), me = g.rank();
    std::size_t max_floats = 0;
    for (const std::size_t s : sizes)
        max_floats = std::max(max_floats, s / sizeof(float));
    if (!schedule.empty() && schedule != "ring" && schedule != "halving")
        throw std::invalid_argument("--schedule is ring or halving, not " + schedule);
    const Allreduce::Schedule how = schedule.empty() ? Allreduce::best(n)
                                    : schedule == "ring" ? Allreduce::Schedule::ring
                                                         : Allreduce::Schedule::halving;
    Allreduce ar(g, max_floats, how, soon());
    ar.set_piece(piece / sizeof(float));
    float* d = ar.data();
    int wrong = 0;
    for (const std::size_t bytes : sizes) {
        const std::size_t count = bytes / sizeof(float);
        // Exact in floats: rank r adds (r + 1) * k, so the sum is n (n + 1) / 2 * k.
        for (std::size_t i = 0; i < count; ++i)
            d[i] = static_cast<float>((me + 1) * (i % 13 + 1));
        ar.run(count, soon());
        for (std::size_t i = 0; i < count; ++i)
            wrong += d[i] != static_cast<float>(n * (n + 1) / 2 * (i % 13 + 1));
        if (!time)
            continue;
        // Timed on zeros (no value grows into a slow path), enough calls for ~0.2 s.
        std::fill(d, d + count, 0.0f);
        const int iters = static_cast<int>(std::clamp<std::size_t>((64u << 20) / std::max<std::size_t>(bytes, 1), 5, 2000));
        g.barrier(soon());
        const auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < iters; ++k)
            ar.run(count, soon());
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
        if (me == 0)
            std::cout << (csv ? "weft," : "all-reduce of ") << bytes << (csv ? "," : " B over ") << n
                      << (csv ? "," : " ranks: ") << us << (csv ? "" : " us per call") << std::endl;
    }
    g.barrier(soon()); // nobody leaves while others write to it
    std::cout << "rank " << me << " of " << n << ": all-reduce " << (wrong ? "WRONG" : "verified")
              << " at every size over " << g.node().provider() << " ("
              << (how == Allreduce::Schedule::ring ? "ring" : "halving") << ")" << std::endl;
    return wrong ? 1 : 0;
} catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
}
