// weft-param-server: a parameter server over a group. Rank 0 holds the parameters; every
// other rank is a worker that, each round, pushes its gradient into its own slot in the
// server's memory (an RMA write with a notification). The server counts the workers'
// notifications, adds the gradients into the parameters, and writes the parameters back
// to every worker as one Transfer, each worker notified once they landed. Every value is
// an exact sum, checked by every worker after every round. Launch as a group:
//   mpirun -np 5 weft-param-server [FLOATS] [ROUNDS] [--yield] [--csv]
// Rank 0 prints rounds per second and the bytes each worker moved per second.
#include <weft/async.hpp>
#include <weft/groups/group.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

using namespace std::chrono_literals;

// Worker w's gradient in round r at index i: small integers, so every sum is exact.
static float gradient(std::uint32_t w, std::uint32_t r, std::size_t i)
{
    return static_cast<float>((w + r + i) % 7);
}

int main(int argc, char** argv)
try {
    std::size_t floats = 1 << 18;
    std::uint32_t rounds = 20;
    bool yield = false, csv = false;
    for (int i = 1, k = 0; i < argc; ++i) {
        const std::string a = argv[i];
        yield |= a == "--yield";
        csv |= a == "--csv";
        if (a.substr(0, 2) != "--")
            k++ == 0 ? void(floats = std::stoul(a)) : void(rounds = static_cast<std::uint32_t>(std::stoul(a)));
    }
    if (floats == 0 || rounds == 0)
        throw std::invalid_argument("FLOATS and ROUNDS are at least 1");
    const auto soon = [] { return weft::Deadline::after(120s); };
    weft::Options o;
    o.waiting = yield ? weft::Waiting::yield : weft::Waiting::spin;
    weft::Group g = weft::Group::from_environment(o, soon());
    const std::uint32_t me = g.rank(), workers = g.size() - 1;
    if (workers == 0)
        throw std::runtime_error("a parameter server needs workers: launch 2 ranks or more");
    weft::Node& node = g.node();
    const auto sum_after = [&](std::uint32_t r, std::size_t i) { // every worker's rounds 0..r
        float want = 0;
        for (std::uint32_t k = 0; k <= r; ++k)
            for (std::uint32_t w = 1; w <= workers; ++w)
                want += gradient(w, k, i);
        return want;
    };
    const std::size_t bytes = floats * sizeof(float);
    // The server: parameters (written to every worker) and a gradient slot per worker.
    // A worker: its gradient (the push's source) and its copy of the parameters, which
    // the server writes.
    auto params = node.allocate(bytes, me == 0 ? weft::Access::local : weft::Access::remote_write);
    auto grads = node.allocate(me == 0 ? workers * bytes : bytes,
                               me == 0 ? weft::Access::remote_write : weft::Access::local);
    // The server's gradient slots ([0]) and each worker's parameters, all gathered (a rank
    // offers RemoteRegion{} for the region it does not export).
    const auto all_grads = g.all_gather(me == 0 ? grads->remote() : weft::RemoteRegion{}, soon());
    const auto all_params = g.all_gather(me == 0 ? weft::RemoteRegion{} : params->remote(), soon());
    g.connect(weft::Topology::star, soon());
    auto* p = reinterpret_cast<float*>(params->data());
    auto* gr = reinterpret_cast<float*>(grads->data());
    int wrong = 0, ctx = 0;
    // The server's answer, prepared once: the parameters to every worker, one notification each.
    std::vector<weft::PeerId> worker_ids;
    std::vector<weft::TransferEntry> answer;
    for (std::uint32_t w = 1; me == 0 && w <= workers; ++w) {
        worker_ids.push_back(g.peer(w));
        answer.push_back({g.peer(w), params->all(), all_params[w], 0});
    }
    std::optional<weft::Transfer> broadcast;
    if (me == 0)
        broadcast.emplace(weft::Transfer::prepare(g.node_ptr(), weft::Direction::write, answer,
                                                  weft::Notify{.enabled = true}));
    const auto gathered = [](weft::Node& n, std::span<const weft::PeerId> from) -> weft::Task<> {
        (void)co_await n.notifications(from, from.size(), weft::Deadline::after(120s));
    };
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint32_t r = 0; r < rounds; ++r) {
        if (me == 0) { // every worker's gradient in, added, and the sum written back to each
            node.run(gathered(node, worker_ids), soon());
            for (std::uint32_t w = 0; w < workers; ++w)
                for (std::size_t i = 0; i < floats; ++i)
                    p[i] += gr[w * floats + i];
            broadcast->set_value(r);
            broadcast->post();
            broadcast->wait(soon());
            continue;
        }
        for (std::size_t i = 0; i < floats; ++i) // push
            gr[i] = gradient(me, r, i);
        node.write_notify(g.peer(0), grads->all(), all_grads[0], (me - 1) * bytes, r, &ctx);
        (void)node.wait(&ctx, soon());
        (void)node.wait_for(weft::Op::notify, g.peer(0), soon()); // the sum is here
        for (std::size_t k = 0; k < 64; ++k) // a sample now; every value after the last round
            wrong += p[(k * 7919 + r) % floats] != sum_after(r, (k * 7919 + r) % floats);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (std::size_t i = 0; me != 0 && i < floats; ++i)
        wrong += p[i] != sum_after(rounds - 1, i);
    g.barrier(soon());
    if (me == 0)
        std::cout << (csv ? "ps," : "") << workers << (csv ? "," : " workers, ") << floats
                  << (csv ? "," : " floats: ") << rounds / s << (csv ? "," : " rounds/s, ")
                  << 2.0 * static_cast<double>(bytes) * rounds / s / 1e6 << (csv ? "" : " MB/s per worker") << std::endl;
    std::cout << "rank " << me << " of " << g.size() << ": parameters "
              << (wrong ? "WRONG" : "verified") << " after " << rounds << " rounds over "
              << node.provider() << std::endl;
    return wrong ? 1 : 0;
} catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
}
