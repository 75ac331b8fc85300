// Lesson 4: a group of ranks. Each rank writes a block to its right neighbour (a ring),
// then to every other rank (a mesh), notifying with its rank; every byte and writer is
// checked. Launch: mpirun, srun --mpi=pmix, or WEFT_STORE=host:port WEFT_RANK=r WEFT_SIZE=n.
#include <weft/groups/group.hpp>

#include <cstdint>
#include <iostream>

using namespace std::chrono_literals;

int main()
{
    constexpr std::size_t block = 64 * 1024;
    // What rank `from` writes to rank `to`: every byte depends on both.
    const auto expected = [](std::uint32_t from, std::uint32_t to, std::size_t i) {
        return static_cast<std::byte>(from * 131 + to * 31 + i * 7);
    };
    const auto soon = [] { return weft::Deadline::after(60s); };
    weft::Group g = weft::Group::from_environment({}, soon()); // alone: a group of one
    const std::uint32_t me = g.rank(), n = g.size();
    if (me == 0)
        std::cout << g.launch() << "\n" << g.choice() << std::endl;

    // One inbox with a block for every rank, one source block; registered once.
    weft::Node& node = g.node();
    auto inbox = node.allocate(n * block, weft::Access::remote_write);
    auto src = node.allocate(block, weft::Access::local);
    const auto inboxes = g.all_gather(inbox->remote(), soon());
    int bad = 0;
    auto put = [&](std::uint32_t to) { // my block into `to`'s inbox, notifying with my rank
        for (std::size_t i = 0; i < block; ++i)
            src->data()[i] = expected(me, to, i);
        int ctx = 0;
        node.write_notify(g.peer(to), src->all(), inboxes[to], me * block, me, &ctx);
        node.wait(&ctx, soon());
    };
    auto take = [&](std::uint32_t count) { // `count` notifications, each block checked
        for (std::uint32_t k = 0; k < count; ++k) {
            const weft::Completion c = node.wait_for(weft::Op::notify, soon());
            const std::uint32_t from = c.data;
            bad += from >= n || g.rank_of(c.peer) != from; // it names its writer
            for (std::size_t i = 0; from < n && i < block; ++i)
                bad += inbox->data()[from * block + i] != expected(from, me, i);
        }
    };
    if (n > 1) {
        g.connect(weft::Topology::ring, soon());
        put((me + 1) % n); // ring: to the right, from the left
        take(1);
        g.barrier(soon());
        for (std::uint32_t to = 0; to < n; ++to) // mesh: to and from everyone
            if (to != me)
                put(to);
        take(n - 1);
    }
    g.barrier(soon()); // nobody leaves while others write to it
    std::cout << "rank " << me << " of " << n << ": ring and mesh "
              << (bad == 0 ? "verified" : "WRONG") << " over " << node.provider() << std::endl;
    return bad == 0 ? 0 : 1;
}
