// SPDX-License-Identifier: MIT
// A rank for groups/topologies.cpp: joins the group its environment names and exchanges
// ROUNDS rounds of 64 KiB blocks, 20 ms apart, with each neighbour in TOPOLOGY (star, ring
// or mesh): an RMA write with a notification into the neighbour's inbox, every byte of what
// arrives checked. Each neighbour is a stream of its own, driven by one poll loop: a rank
// sends round r to a neighbour once that neighbour's round r - 1 has arrived, so a
// neighbour that stalls holds up nobody else. A neighbour silent for SILENCE seconds (5 by
// default; its link went down), or whose connection broke before its stream was done, is dropped, said so with
// why; one done may leave while this rank still works with slower ones (behind a lossy
// link). A rank left with no neighbour ends with status 3. Prints "READY" once a round went
// both ways with every neighbour, and at the end "rank R: TOPOLOGY verified, K rounds with
// N neighbours".
//   weft-test-topology star|ring|mesh ROUNDS [SILENCE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/groups/group.hpp"

using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 64 * 1024;

std::byte expected(std::uint32_t from, std::uint32_t to, std::uint32_t round, std::size_t i)
{
    return static_cast<std::byte>(from * 131 + to * 31 + round * 17 + i * 7);
}

weft::Topology topology_of(const std::string& name)
{
    if (name == "star")
        return weft::Topology::star;
    if (name == "ring")
        return weft::Topology::ring;
    if (name == "mesh")
        return weft::Topology::mesh;
    throw std::invalid_argument("TOPOLOGY is star, ring or mesh, not " + name);
}

} // namespace

int main(int argc, char** argv)
try {
    if (argc != 3 && argc != 4) {
        std::fprintf(stderr, "usage: %s star|ring|mesh ROUNDS [SILENCE]\n", argv[0]);
        return 2;
    }
    const weft::Topology t = topology_of(argv[1]);
    const auto rounds = static_cast<std::uint32_t>(std::stoul(argv[2]));
    const std::chrono::seconds silence(argc == 4 ? std::stoul(argv[3]) : 5);
    weft::Group g = weft::Group::from_environment({}, weft::Deadline::after(120s));
    const std::uint32_t me = g.rank(), n = g.size();
    weft::Node& node = g.node();
    // Two inbox blocks per rank (by the round's parity): a neighbour is at most one round ahead.
    auto inbox = node.allocate(2 * n * block, weft::Access::remote_write);
    auto src = node.allocate(block, weft::Access::local);
    const auto inboxes = g.all_gather(inbox->remote(), weft::Deadline::after(60s));
    g.connect(t, weft::Deadline::after(60s));
    struct Stream {
        weft::PeerId peer;
        std::shared_ptr<weft::MemoryRegion> src; // this neighbour's own: a send in flight keeps it
        std::uint32_t sent = 0, received = 0;     // rounds
        bool sending = false;
        weft::Deadline heard = weft::Deadline::after(std::chrono::seconds(0)); // set below
        weft::Deadline paced = weft::Deadline::after(std::chrono::seconds(0)); // 20 ms a round
    };
    std::map<std::uint32_t, Stream> alive; // by neighbour rank
    for (const std::uint32_t r : g.neighbours(t))
        alive[r] = Stream{.peer = g.peer(r),
                          .src = node.allocate(block, weft::Access::local),
                          .heard = weft::Deadline::after(silence)};
    const std::size_t neighbours = alive.size();
    const auto drop = [&](std::uint32_t r, const std::string& why) {
        std::printf("rank %u: lost neighbour %u: %s\n", me, r, why.c_str());
        std::fflush(stdout);
        alive.erase(r);
    };
    const auto rank_of = [&](weft::PeerId p) {
        for (auto& [r, s] : alive)
            if (s.peer == p)
                return r;
        return n; // none: a dropped neighbour's late completion
    };
    int wrong = 0;
    bool ready = false;
    const auto done = [&](const Stream& s) {
        return s.received == rounds && s.sent == rounds && !s.sending;
    };
    const auto finished = [&] {
        return std::ranges::all_of(alive, [&](auto& e) { return done(e.second); });
    };
    while (!alive.empty() && !finished()) {
        for (auto it = alive.begin(); it != alive.end();) { // sends that may go now
            auto& [to, s] = *it++;
            if (s.sending || s.sent == rounds || s.sent > s.received || !s.paced.expired())
                continue;
            s.paced = weft::Deadline::after(std::chrono::milliseconds(20));
            try {
                for (std::size_t i = 0; i < block; ++i)
                    s.src->data()[i] = expected(me, to, s.sent, i);
                node.write_notify(s.peer, s.src->all(), inboxes[to],
                                  s.sent % 2 * n * block + me * block, s.sent, &s);
                s.sending = true;
            } catch (const weft::Error& e) {
                drop(to, e.what());
            }
        }
        weft::Completion got[16];
        std::size_t k = 0;
        try {
            k = node.poll(got);
        } catch (const weft::Error& e) { // a write that failed: its context names the stream
            for (auto& [r, s] : alive)
                if (&s == e.context()) {
                    drop(r, e.what());
                    break;
                }
        }
        for (const weft::Completion& c : std::span(got, k)) {
            if (c.op == weft::Op::write) {
                for (auto& [r, s] : alive)
                    if (&s == c.context) {
                        s.sending = false;
                        ++s.sent;
                    }
                continue;
            }
            const std::uint32_t from = rank_of(c.peer);
            if (c.op != weft::Op::notify || from == n)
                continue;
            Stream& s = alive[from];
            wrong += c.data != s.received;
            const std::uint64_t at = s.received % 2 * n * block + from * block;
            for (std::size_t i = 0; i < block; ++i)
                wrong += inbox->data()[at + i] != expected(from, me, s.received, i);
            ++s.received;
            s.heard = weft::Deadline::after(silence);
        }
        for (auto it = alive.begin(); it != alive.end();) { // neighbours silent too long
            auto& [r, s] = *it++;
            if (s.received < rounds && s.heard.expired())
                drop(r, fmt::format("nothing from it for {} s (round {} of {} awaited)", silence.count(),
                                     s.received, rounds));
            else if (node.is_lost(s.peer) && !done(s)) // done, it may leave: others may not be
                drop(r, "its connection broke");
        }
        if (!ready && std::ranges::all_of(alive, [](auto& e) { return e.second.received > 0; })) {
            ready = true;
            std::printf("READY\n");
            std::fflush(stdout);
        }
        if (k == 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (alive.empty() && neighbours > 0) {
        std::printf("rank %u: no neighbour left\n", me);
        return 3;
    }
    // Everyone's last block is in (each stream waits for the other side's last round), but a
    // neighbour may still be polling for its last write's completion: linger a moment.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::printf("rank %u: %s %s, %u rounds with %zu neighbours\n", me, argv[1],
                wrong ? "WRONG" : "verified", rounds, alive.size());
    return wrong ? 1 : 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
}
