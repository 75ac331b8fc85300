// Lesson 7: a transfer, awaited. Rank 0 (prefill) writes 256 blocks of a KV cache to ranks 1 and
// 2 (decode) as one Transfer; each decode rank is notified once, after all of its blocks landed,
// and checks them then. Coroutines throughout. Launch as lesson 4 does (3 ranks).
#include <weft/async.hpp>
#include <weft/groups/group.hpp>

#include <iostream>

using namespace std::chrono_literals;
constexpr std::size_t blocks = 256, block = 16 * 1024;
std::byte at(std::size_t b, std::size_t i) { return std::byte(b * 7 + i * 13 + 1); }

weft::Task<> prefill(weft::Group& g, std::shared_ptr<weft::Node> node,
                     const std::vector<weft::RemoteRegion>& caches)
{
    auto kv = node->allocate(blocks * block, weft::Access::local); // the prefill's cache
    for (std::size_t i = 0; i < blocks * block; ++i)
        kv->data()[i] = at(i / block, i % block);
    std::vector<weft::TransferEntry> entries; // even blocks to rank 1, odd ones to rank 2
    for (std::size_t b = 0; b < blocks; ++b)
        entries.push_back({g.peer(1 + b % 2), kv->slice(b * block, block), caches[1 + b % 2],
                           (b / 2) * block});
    auto t = weft::Transfer::prepare(node, weft::Direction::write, entries, {.enabled = true});
    t.post();
    co_await t.done(weft::Deadline::after(30s));
}

weft::Task<bool> decode(weft::Group& g, weft::MemoryRegion& cache, std::uint32_t me)
{
    co_await g.node().notification(g.peer(0), weft::Deadline::after(30s)); // once, all landed
    bool right = true;
    for (std::size_t b = me - 1; b < blocks; b += 2)
        for (std::size_t i = 0; i < block; ++i)
            right = right && cache.data()[(b / 2) * block + i] == at(b, i);
    co_return right;
}

int main()
{
    weft::Group g = weft::Group::from_environment({}, weft::Deadline::after(60s));
    if (g.size() != 3)
        return std::cerr << "run 3 ranks: a prefill and two decoders\n", 2;
    auto cache = g.node().allocate(blocks / 2 * block, weft::Access::remote_write);
    const auto caches = g.all_gather(cache->remote(), weft::Deadline::after(60s));
    g.connect(weft::Topology::star, weft::Deadline::after(60s));
    bool right = true;
    if (g.rank() == 0)
        g.node().run(prefill(g, g.node_ptr(), caches), weft::Deadline::after(60s));
    else
        right = g.node().run(decode(g, *cache, g.rank()), weft::Deadline::after(60s));
    g.barrier(weft::Deadline::after(60s)); // nobody leaves while others write to it
    std::cout << "rank " << g.rank() << ": " << (g.rank() ? (right ? "128 blocks verified" : "WRONG")
                                                          : "256 blocks written") << std::endl;
    return right ? 0 : 1;
}
