// SPDX-License-Identifier: MIT
// weft-test-blocks: the two ends of a block stream, for the dead-writer test
// (tests/faults/dead_writer.cpp), as processes of their own.
//   (KIND is msg or rdm; msg+lane or rdm+lane: Options::same_host = lane.)
//   weft-test-blocks read PROVIDER KIND ADDRESS WAIT_MS
//     a reader: prints "PORT n", accepts one writer, exposes 1 MiB for its
//     writes and waits for its notifications, each wait WAIT_MS at most. When
//     a wait fails it prints "END lost=0|1 blocks=N: what" and exits 0.
//   weft-test-blocks write PROVIDER KIND ADDRESS HOST:PORT...
//     a writer: connects to every reader, prints "WRITING", and writes to
//     each reader in turn, until killed, a batch of 64 KiB blocks and then a
//     notification (as a KV cache's blocks go): plain writes are the ones shm
//     copies inside the reader's region lock.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "weft/weft.hpp"
#include "support/die_with_parent.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 64u << 10;
constexpr std::size_t slots = 16;

int read_blocks(const Options& o, const char* address, int wait_ms)
{
    Server server(o, address, 0);
    std::printf("PORT %u\n", server.port());
    std::fflush(stdout);
    std::vector<std::shared_ptr<MemoryRegion>> held; // outlive the connection
    Connection c = server.accept(Deadline::after(60s));
    auto inbox = held.emplace_back(c.allocate(block * slots, Access::remote_write));
    (void)c.exchange(inbox->remote(), Deadline::after(30s));
    std::uint64_t blocks = 0;
    try {
        for (;;) {
            (void)c.wait_for(Op::notify, Deadline::after(std::chrono::milliseconds(wait_ms)));
            ++blocks;
        }
    } catch (const Error& e) {
        std::printf("END lost=%d blocks=%llu: %s\n", e.peer_lost() ? 1 : 0,
                    static_cast<unsigned long long>(blocks), e.what());
        std::fflush(stdout);
    }
    return 0;
}

int write_blocks(const Options& o, const std::vector<std::string>& readers)
{
    std::vector<Connection> to;
    std::vector<RemoteRegion> inbox;
    std::vector<std::shared_ptr<MemoryRegion>> mine;
    for (const auto& r : readers) {
        to.push_back(Connection::connect(r, o, Deadline::after(60s)));
        // Readers need nothing of the writer's: it exposes a byte for the exchange.
        auto& m = mine.emplace_back(to.back().allocate(64, Access::remote_read));
        inbox.push_back(to.back().exchange(m->remote(), Deadline::after(30s)));
    }
    std::vector<std::shared_ptr<MemoryRegion>> src;
    for (auto& c : to) {
        src.push_back(c.allocate(block, Access::local));
        std::memset(src.back()->data(), 0x5a, block);
    }
    for (auto& c : to) // the lane asked for: every reader on it, or the run proves nothing
        if (o.same_host == SameHost::lane && !c.node().on_lane(c.peer_id())) {
            std::printf("WRITING off the lane: %s\n", c.node().path(c.peer_id()).c_str());
            std::fflush(stdout);
            return 1;
        }
    std::printf("WRITING\n");
    std::fflush(stdout);
    int ctx = 0;
    for (std::uint32_t i = 0;; ++i)
        for (std::size_t r = 0; r < to.size(); ++r) {
            for (std::size_t b = 0; b < slots; ++b) {
                to[r].write(src[r]->all(), inbox[r], b * block, &ctx);
                (void)to[r].wait(&ctx, Deadline::after(30s));
            }
            to[r].write_notify(src[r]->slice(0, 8), inbox[r], 0, i, &ctx);
            (void)to[r].wait(&ctx, Deadline::after(30s));
        }
}

} // namespace

int main(int argc, char** argv)
{
    weft::test::die_with_parent();
    const bool read = argc == 6 && std::strcmp(argv[1], "read") == 0;
    const bool write = argc >= 6 && std::strcmp(argv[1], "write") == 0;
    if (!read && !write) {
        std::fprintf(stderr, "usage: weft-test-blocks read PROVIDER KIND ADDRESS WAIT_MS\n"
                             "       weft-test-blocks write PROVIDER KIND ADDRESS HOST:PORT...\n"
                             "KIND: msg, rdm, msg+lane or rdm+lane\n");
        return 2;
    }
    try {
        Options o;
        o.provider = argv[2];
        o.kind = std::strncmp(argv[3], "rdm", 3) == 0 ? EndpointKind::rdm : EndpointKind::msg;
        if (std::strstr(argv[3], "+lane") != nullptr)
            o.same_host = SameHost::lane;
        o.allow_shm = o.provider == "shm";
        o.node = argv[4];
        if (read)
            return read_blocks(o, argv[4], std::atoi(argv[5]));
        return write_blocks(o, std::vector<std::string>(argv + 5, argv + argc));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-test-blocks: %s\n", e.what());
        return 1;
    }
}
