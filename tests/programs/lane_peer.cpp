// SPDX-License-Identifier: MIT
// weft-test-lane-peer: the other process of the same-host lane's tests. It
// opens a Node with the lane on (like the hub's), adds the hub, and:
//   serve SIZE        allocates SIZE bytes (remote read-write, every byte 0x5a),
//                     prints "READY <node address> <region>" (hex), serves until killed;
//   read REGION_HEX   prints "READY <node address> -", reads the hub's region in
//                     a loop until killed;
//   check N REGION_HEX TALLY_HEX INDEX
//                     prints "READY <node address> -", reads 64 B of the hub's
//                     region N times (offsets in turn), checks every byte against
//                     pattern(), and every 1000 reads writes its count to slot
//                     INDEX of the hub's tally and notifies it (value: the count);
//                     prints "DONE <reads> <wrong bytes>" and exits;
//   enforced          SameHost::enforced: two Nodes of its own, one reading the
//                     other's allocate()d and register_memory() regions; prints
//                     "ENFORCED <allocated: ok|refused> <registered: ok|refused> <path>".
//   usage: weft-test-lane-peer PROVIDER msg|rdm HUB_HEX MODE [ARG]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "support/die_with_parent.hpp"
#include "support/hex.hpp"
#include "support/lane_pattern.hpp"
#include "weft/weft.hpp"

using namespace weft;
using weft::test::hex;
using weft::test::unhex;

namespace {

Options options(const char* provider, const char* kind, SameHost mode)
{
    Options o;
    o.provider = provider;
    o.kind = std::string(kind) == "msg" ? EndpointKind::msg : EndpointKind::rdm;
    o.allow_shm = true;
    o.node = "127.0.0.1";
    o.same_host = mode;
    return o;
}

int enforced(const Options& o)
{
    auto a = Node::open(o);
    auto b = Node::open(o);
    const PeerId to_b = a->add_peer(b->address());
    (void)b->add_peer(a->address());
    auto shared = b->allocate(4096, Access::remote_read);
    static std::vector<std::byte> plain(4096);
    auto registered = b->register_memory(plain, Access::remote_read);
    auto sink = a->allocate(4096, Access::local);
    const auto try_read = [&](const MemoryRegion& r) {
        int ctx = 0;
        try {
            a->read(to_b, sink->slice(0, 8), r.remote(), 0, &ctx);
            (void)a->wait(&ctx, Deadline::after(std::chrono::seconds(10)));
            return "ok";
        } catch (const Error&) {
            return "refused";
        }
    };
    const char* s = try_read(*shared);
    const char* r = try_read(*registered);
    std::printf("ENFORCED %s %s %s\n", s, r, a->path(to_b).c_str());
    return 0;
}

int check(Node& node, PeerId hub, std::uint64_t n, const RemoteRegion& theirs,
          const RemoteRegion& tally, std::uint64_t index)
{
    auto sink = node.allocate(64, Access::local);
    auto count = node.allocate(8, Access::local);
    std::printf("READY %s -\n", hex(node.address().encode()).c_str());
    std::fflush(stdout);
    const std::uint64_t lines = theirs.length() / 64;
    std::uint64_t wrong = 0;
    int ctx = 0;
    for (std::uint64_t i = 1; i <= n; ++i) {
        const std::uint64_t offset = (i % lines) * 64;
        node.read(hub, sink->slice(0, 64), theirs, offset, &ctx);
        (void)node.wait(&ctx, Deadline::after(std::chrono::seconds(10)));
        for (std::size_t j = 0; j < 64; ++j)
            wrong += sink->data()[j] != weft::test::lane_pattern(offset + j);
        if (i % 1000 == 0 || i == n) {
            std::memcpy(count->data(), &i, 8);
            node.write_notify(hub, count->slice(0, 8), tally, index * 8,
                              static_cast<std::uint32_t>(i), &ctx);
            (void)node.wait(&ctx, Deadline::after(std::chrono::seconds(10)));
        }
    }
    std::printf("DONE %llu %llu\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(wrong));
    std::fflush(stdout);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    weft::test::die_with_parent();
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s PROVIDER msg|rdm HUB_HEX MODE [ARG]\n", argv[0]);
        return 2;
    }
    try {
        const std::string mode = argv[4];
        if (mode == "enforced")
            return enforced(options(argv[1], argv[2], SameHost::enforced));
        auto node = Node::open(options(argv[1], argv[2], SameHost::lane));
        const PeerId hub = node->add_peer(NodeAddress::decode(unhex(argv[3])));
        if (mode == "serve" && argc == 6) {
            auto region = node->allocate(std::stoul(argv[5]), Access::remote_read_write);
            std::memset(region->data(), 0x5a, region->size());
            std::printf("READY %s %s\n", hex(node->address().encode()).c_str(),
                        hex(region->remote().encode()).c_str());
            std::fflush(stdout);
            for (;;)
                (void)node->dispatch();
        }
        if (mode == "check" && argc == 9)
            return check(*node, hub, std::stoull(argv[5]), RemoteRegion::decode(unhex(argv[6])),
                         RemoteRegion::decode(unhex(argv[7])), std::stoull(argv[8]));
        if (mode == "read" && argc == 6) {
            const RemoteRegion theirs = RemoteRegion::decode(unhex(argv[5]));
            auto sink = node->allocate(theirs.length(), Access::local);
            std::printf("READY %s -\n", hex(node->address().encode()).c_str());
            std::fflush(stdout);
            for (int ctx = 0;;) {
                node->read(hub, sink->slice(0, 64), theirs, 0, &ctx);
                (void)node->wait(&ctx, Deadline::after(std::chrono::seconds(10)));
            }
        }
        std::fprintf(stderr, "weft-test-lane-peer: unknown mode %s\n", mode.c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-test-lane-peer: %s\n", e.what());
        return 1;
    }
}
