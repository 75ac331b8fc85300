// SPDX-License-Identifier: MIT
// A rank for groups/ranks_as_processes.cpp's failure cases: joins the group its environment
// names, meets the others at a barrier, and then either stalls (the rank in
// WEFT_TEST_VICTIM, which the test kills, or which kills itself with
// WEFT_TEST_SELF_KILL set) or waits at a second barrier,
// which must end with an error naming the victim. Prints when (steady clock,
// ns) and what it got. With WEFT_TEST_SHRINK set, the survivors then shrink
// to a group without the victim and verify ring and mesh traffic in it.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/groups/group.hpp"

using namespace std::chrono_literals;

namespace {

/// Whether `e` says "rank(s) ... left", with `victim` among them (survivors
/// that already left on the same error may be named too).
bool names(const weft::Error& e, std::uint32_t victim)
{
    const std::string what = e.what();
    const auto from = what.find("rank(s) ");
    const auto to = what.find(" left", from);
    if (from == std::string::npos || to == std::string::npos)
        return false;
    return (", " + what.substr(from + 8, to - from - 8) + ",")
               .find(fmt::format(" {},", victim)) != std::string::npos;
}

std::byte expected(std::uint32_t from, std::uint32_t to, std::size_t i)
{
    return static_cast<std::byte>((from * 131 + to * 31 + i * 7) & 0xff);
}

/// Ring, then mesh, in `g`: every block and every notification's rank
/// checked; the number of wrong ones.
int ring_and_mesh(weft::Group& g)
{
    constexpr std::size_t block = 4096;
    const std::uint32_t me = g.rank();
    const std::uint32_t n = g.size();
    weft::Node& node = g.node();
    auto inbox = node.allocate(n * block, weft::Access::remote_write);
    auto src = node.allocate(block, weft::Access::local);
    const auto inboxes = g.all_gather(inbox->remote(), weft::Deadline::after(60s));
    const auto put = [&](std::uint32_t to) {
        for (std::size_t i = 0; i < block; ++i)
            src->data()[i] = expected(g.origin(me), g.origin(to), i);
        int ctx = 0;
        node.write_notify(g.peer(to), src->slice(0, block), inboxes[to], me * block, me, &ctx);
        node.wait(&ctx, weft::Deadline::after(60s));
    };
    int bad = 0;
    const auto take = [&](std::uint32_t count) {
        for (std::uint32_t k = 0; k < count; ++k) {
            const auto c = node.wait_for(weft::Op::notify, weft::Deadline::after(60s));
            const auto from = static_cast<std::uint32_t>(c.data);
            bad += g.rank_of(c.peer) != from;
            for (std::size_t i = 0; i < block; ++i)
                bad += inbox->data()[from * block + i] != expected(g.origin(from), g.origin(me), i);
        }
    };
    g.connect(weft::Topology::ring, weft::Deadline::after(60s));
    put((me + 1) % n);
    take(1);
    g.barrier(weft::Deadline::after(60s));
    for (std::uint32_t to = 0; to < n; ++to)
        if (to != me)
            put(to);
    take(n - 1);
    g.barrier(weft::Deadline::after(60s));
    return bad;
}

} // namespace

int main()
{
    const char* v = std::getenv("WEFT_TEST_VICTIM");
    const auto victim = static_cast<std::uint32_t>(v ? std::atoi(v) : 1);
    std::optional<weft::Group> g;
    try {
        g.emplace(weft::Group::from_environment({}, weft::Deadline::after(60s)));
        g->barrier(weft::Deadline::after(60s));
        if (g->rank() == victim) {
            fmt::print("READY\n");
            std::fflush(stdout);
            if (std::getenv("WEFT_TEST_SELF_KILL")) { // a launcher's rank: no pid for the test
                std::this_thread::sleep_for(300ms);   // the others are in their second barrier
                fmt::print("KILLED AT {}\n", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now().time_since_epoch())
                                                .count());
                std::fflush(stdout);
                std::raise(SIGKILL);
            }
            std::this_thread::sleep_for(120s); // killed before this ends
            return 3;
        }
        g->barrier(weft::Deadline::after(60s));
        fmt::print("rank {}: the barrier returned though rank {} never came\n", g->rank(), victim);
        return 1;
    } catch (const weft::Error& e) {
        const auto at = std::chrono::steady_clock::now().time_since_epoch();
        fmt::print("AT {} LOST {} {}\n",
                   std::chrono::duration_cast<std::chrono::nanoseconds>(at).count(),
                   e.peer_lost() ? 1 : 0, e.what());
        if (!e.peer_lost() || !names(e, victim))
            return 2;
    }
    if (!std::getenv("WEFT_TEST_SHRINK"))
        return 0;
    try {
        weft::Group smaller = g->shrink(weft::Deadline::after(60s));
        const int bad = ring_and_mesh(smaller);
        fmt::print("SHRUNK rank {} of {} (first {}): ring and mesh {}\n", smaller.rank(),
                   smaller.size(), smaller.origin(smaller.rank()), bad == 0 ? "verified" : "WRONG");
        return bad == 0 ? 0 : 4;
    } catch (const std::exception& e) {
        fmt::print("SHRINK FAILED {}\n", e.what());
        return 5;
    }
}
