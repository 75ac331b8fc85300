// SPDX-License-Identifier: MIT
// weft-test-peer: the far end of the two-process tests. It accepts one client,
// exposes an 8 MiB region, and answers commands sent over the side channel.
//   usage: weft-test-peer PROVIDER msg|rdm ADDRESS [PORT]
// With --stream HOST:PORT it is a client instead: it connects to a weft server
// there, exchanges regions and writes to the server's region until it is
// killed (the fault tests kill it) or the server leaves.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "support/pattern.hpp"
#include "weft/weft.hpp"
#include "support/die_with_parent.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

std::uint64_t u64(const std::vector<std::byte>& b, std::size_t at)
{
    std::uint64_t v = 0;
    std::memcpy(&v, b.data() + at, 8);
    return v;
}

void reply(Connection& c, std::uint64_t value)
{
    std::array<std::byte, 8> b{};
    std::memcpy(b.data(), &value, 8);
    c.side().send(detail::Frame::data, b, Deadline::after(30s));
}

} // namespace

int stream(Options o, const char* server)
{
    Connection c = Connection::connect(server, o, Deadline::after(60s));
    auto src = c.allocate(1u << 20, Access::local);
    auto mine = c.allocate(4096, Access::remote_read); // the exchange is symmetric
    const RemoteRegion target = c.exchange(mine->remote(), Deadline::after(30s));
    std::printf("STREAMING\n");
    std::fflush(stdout);
    int ctx = 0;
    for (std::uint64_t i = 0;; ++i) {
        weft::test::fill_pattern(src->bytes().first(65536), i);
        c.write(src->slice(0, 65536), target, (i * 65536) % (target.length() - 65536), &ctx);
        (void)c.wait(&ctx, Deadline::after(30s));
        // A server that left (its side channel closed) ends the stream, also
        // where writes to it still complete (shm, RDM).
        if (i % 16 == 15) {
            c.node().progress();
            if (c.node().is_lost(c.peer_id())) {
                std::printf("the server left\n");
                return 0;
            }
        }
    }
}

int main(int argc, char** argv)
{
    weft::test::die_with_parent();
    if (argc != 4 && argc != 5 && !(argc == 6 && std::strcmp(argv[4], "--stream") == 0)) {
        std::fprintf(stderr, "usage: weft-test-peer PROVIDER msg|rdm ADDRESS [PORT | --stream HOST:PORT]\n");
        return 2;
    }
    try {
        Options o;
        o.provider = argv[1];
        o.kind = std::strcmp(argv[2], "rdm") == 0 ? EndpointKind::rdm : EndpointKind::msg;
        o.allow_shm = true;
        o.node = argv[3];
        o.slot_size = (4u << 20) + 64;
        o.rx_slots = 4;
        if (argc == 6)
            return stream(o, argv[5]);
        Server server(o, argv[3], argc == 5 ? static_cast<std::uint16_t>(std::atoi(argv[4])) : 0);
        std::printf("PORT %u\n", server.port());
        std::fflush(stdout);
        // Exposed memory outlives the connection that exposes it.
        std::shared_ptr<MemoryRegion> region;
        Connection c = server.accept(Deadline::after(60s));
        constexpr std::size_t size = 8u << 20;
        region = c.allocate(size, Access::remote_read_write);
        (void)c.exchange(region->remote(), Deadline::after(30s));
        auto echo = c.allocate(4u << 20, Access::local);
        int ctx = 0;
        for (;;) {
            const auto cmd = c.side().receive(detail::Frame::data, Deadline::after(120s));
            switch (static_cast<char>(cmd.at(0))) {
            case 'N': // wait for a notification, reply its value
                reply(c, c.endpoint().wait_for(Op::notify, Deadline::after(30s)).data);
                break;
            case 'E': { // echo one message
                const auto m = c.endpoint().wait_for(Op::recv, Deadline::after(30s));
                std::memcpy(echo->data(), m.message.data(), m.message.size());
                c.send(echo->slice(0, m.message.size()), &ctx);
                (void)c.endpoint().wait(&ctx, Deadline::after(30s));
                reply(c, m.message.size());
                break;
            }
            case 'C': // checksum of [off, off+len)
                reply(c, crc32c(region->bytes().subspan(u64(cmd, 1), u64(cmd, 9))));
                break;
            case 'F': // fill [off, off+len) from seed
                weft::test::fill_pattern(region->bytes().subspan(u64(cmd, 1), u64(cmd, 9)),
                                         u64(cmd, 17));
                reply(c, 0);
                break;
            case 'Q':
                return 0;
            default:
                std::fprintf(stderr, "weft-test-peer: unknown command\n");
                return 2;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-test-peer: %s\n", e.what());
        return 1;
    }
}
