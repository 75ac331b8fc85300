// Lesson 2: a group of ranks. Each rank writes a block into its right
// neighbour's memory around a ring, then into every other rank's (a mesh),
// each write with a notification naming the writer; every byte is checked.
// Launch with mpirun, srun --mpi=pmix, or WEFT_STORE=host:port WEFT_RANK=r
// WEFT_SIZE=n for each rank (README: Groups); alone, it is a group of one.
#include <weft/group.hpp>

#include <cstdint>
#include <cstring>
#include <iostream>

using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 64 * 1024;

/// What rank `from` writes to rank `to`: every byte depends on both.
std::byte expected(std::uint32_t from, std::uint32_t to, std::size_t i)
{
    return static_cast<std::byte>((from * 131 + to * 31 + i * 7) & 0xff);
}

} // namespace

int main()
{
    weft::Group g = weft::Group::from_environment({}, weft::Deadline::after(60s));
    const std::uint32_t me = g.rank();
    const std::uint32_t n = g.size();
    if (me == 0)
        std::cout << g.launch() << "\n" << g.choice() << std::endl;

    // One inbox with a block for every rank, one source block; registered once.
    weft::Node& node = g.node();
    auto inbox = node.allocate(n * block, weft::Access::remote_write);
    auto src = node.allocate(block, weft::Access::local);
    const auto inboxes = g.all_gather(inbox->remote(), weft::Deadline::after(60s));

    // Writes `me`'s block into `to`'s inbox; the notification carries `me`.
    auto put = [&](std::uint32_t to) {
        for (std::size_t i = 0; i < block; ++i)
            src->data()[i] = expected(me, to, i);
        int ctx = 0;
        node.write_notify(g.peer(to), src->slice(0, block), inboxes[to], me * block, me, &ctx);
        node.wait(&ctx, weft::Deadline::after(60s));
    };
    // Takes `count` notifications and checks the block each names.
    int bad = 0;
    auto take = [&](std::uint32_t count) {
        for (std::uint32_t k = 0; k < count; ++k) {
            const weft::Completion c = node.wait_for(weft::Op::notify, weft::Deadline::after(60s));
            const auto from = static_cast<std::uint32_t>(c.data);
            bad += g.rank_of(c.peer) != from; // the notification names its writer
            for (std::size_t i = 0; i < block; ++i)
                bad += inbox->data()[from * block + i] != expected(from, me, i);
        }
    };

    if (n > 1) {
        g.connect(weft::Topology::ring, weft::Deadline::after(60s));
        put((me + 1) % n); // ring: to the right, from the left
        take(1);
        g.barrier(weft::Deadline::after(60s));
        for (std::uint32_t to = 0; to < n; ++to) // mesh: to and from everyone
            if (to != me)
                put(to);
        take(n - 1);
    }
    g.barrier(weft::Deadline::after(60s)); // nobody leaves while others write to it
    std::cout << "rank " << me << " of " << n << ": ring and mesh "
              << (bad == 0 ? "verified" : "WRONG") << " over " << node.provider() << std::endl;
    return bad == 0 ? 0 : 1;
}
