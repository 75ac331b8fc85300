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
//                     prints "DONE <reads> <wrong bytes> lane=<1: on the lane>" and exits;
//   undumpable-serve  as uid 65534, non-dumpable (a peer of the same uid cannot
//                     process_vm_* into it): serves an allocated and a registered
//                     region, prints "READY <node address> <allocated> <registered>";
//   undumpable-read ADDRESS ALLOCATED REGISTERED
//                     as uid 65534: reads and writes both regions of that peer and
//                     prints "UNDUMPABLE <allocated: ok|bad> <registered: ok|bad>
//                     <lane reaches allocated: 0|1> <registered: 0|1> <path>";
//   enforced          SameHost::enforced: two Nodes of its own, one reading the
//                     other's allocate()d and register_memory() regions; prints
//                     "ENFORCED <allocated: ok|refused> <registered: ok|refused>
//                     <allocated, registered whole on a third Node: ok|refused> <path>".
//   usage: weft-test-lane-peer PROVIDER msg|rdm HUB_HEX MODE [ARG]
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
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
    // A third Node registers b's allocation whole: it borrows the sealed memfd,
    // the only thing enforced reaches.
    auto c = Node::open(o);
    const PeerId to_c = a->add_peer(c->address());
    (void)c->add_peer(a->address());
    auto borrowed = c->register_memory({shared->data(), shared->size()}, Access::remote_read);
    const auto try_read = [&](const MemoryRegion& r, PeerId to = PeerId{}) {
        int ctx = 0;
        try {
            a->read(to ? to : to_b, sink->slice(0, 8), r.remote(), 0, &ctx);
            (void)a->wait(&ctx, Deadline::after(std::chrono::seconds(10)));
            return "ok";
        } catch (const Error&) {
            return "refused";
        }
    };
    const char* s = try_read(*shared);
    const char* r = try_read(*registered);
    const char* b2 = try_read(*borrowed, to_c);
    std::printf("ENFORCED %s %s %s %s\n", s, r, b2, a->path(to_b).c_str());
    return 0;
}

/// As uid 65534 (no CAP_SYS_PTRACE), for the undumpable-* modes.
bool become_nobody()
{
    return ::setgid(65534) == 0 && ::setuid(65534) == 0;
}

int undumpable_serve(const Options& o)
{
    if (!become_nobody()) {
        std::printf("UNDUMPABLE cannot become uid 65534\n");
        return 1;
    }
    (void)::prctl(PR_SET_DUMPABLE, 0);
    auto node = Node::open(o);
    auto allocated = node->allocate(4096, Access::remote_read_write);
    std::memset(allocated->data(), 0x5a, 4096);
    static std::vector<std::byte> plain(4096, std::byte{0x6b});
    auto registered = node->register_memory(plain, Access::remote_read_write);
    std::printf("READY %s %s %s\n", hex(node->address().encode()).c_str(),
                hex(allocated->remote().encode()).c_str(),
                hex(registered->remote().encode()).c_str());
    std::fflush(stdout);
    for (;;)
        (void)node->dispatch();
}

int undumpable_read(const Options& o, const char* address, const char* a, const char* b)
{
    if (!become_nobody()) {
        std::printf("UNDUMPABLE cannot become uid 65534\n");
        return 1;
    }
    auto node = Node::open(o);
    const PeerId peer = node->add_peer(NodeAddress::decode(unhex(address)));
    const RemoteRegion ra = RemoteRegion::decode(unhex(a));
    const RemoteRegion rb = RemoteRegion::decode(unhex(b));
    auto sink = node->allocate(64, Access::local);
    const auto deadline = [] { return Deadline::after(std::chrono::seconds(10)); };
    int ctx = 0;
    const auto read_is = [&](const RemoteRegion& r, std::byte v) {
        node->read(peer, sink->slice(0, 64), r, 0, &ctx);
        (void)node->wait(&ctx, deadline());
        for (std::size_t i = 0; i < 64; ++i)
            if (sink->data()[i] != v)
                return false;
        return true;
    };
    const bool a_ok = read_is(ra, std::byte{0x5a});
    std::memset(sink->data(), 0x77, 64);
    node->write(peer, sink->slice(0, 64), rb, 0, &ctx);
    (void)node->wait(&ctx, deadline());
    const bool b_ok = read_is(rb, std::byte{0x77});
    std::printf("UNDUMPABLE %s %s %d %d %s\n", a_ok ? "ok" : "bad", b_ok ? "ok" : "bad",
                node->on_lane(peer, &ra) ? 1 : 0, node->on_lane(peer, &rb) ? 1 : 0,
                node->path(peer).c_str());
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
    std::printf("DONE %llu %llu lane=%d\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(wrong), node.on_lane(hub) ? 1 : 0);
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
        if (mode == "undumpable-serve")
            return undumpable_serve(options(argv[1], argv[2], SameHost::lane));
        if (mode == "undumpable-read" && argc == 8)
            return undumpable_read(options(argv[1], argv[2], SameHost::lane), argv[5], argv[6],
                                   argv[7]);
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
