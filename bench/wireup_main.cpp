// SPDX-License-Identifier: MIT
// weft-wireup: a weft group's wire-up, as weft-wireup-raw does it by hand:
// join through the store the environment names (PMIx under mpirun, WEFT_ETCD,
// or WEFT_STORE for the TCP store), then one message around the ring (every
// rank reached its neighbour), then a barrier. Argument: the provider
// (default tcp;ofi_rxm, RDM, as the reference).
//
// The store's own share is measured, not estimated: every store call of the
// wire-up is recorded, and once all ranks are through, each rank replays its
// calls (its keys are all there then, and every rank's barriers meet at
// once), so the replay's time is what the store itself costs, without the
// waiting for other ranks to start. Rank 0 prints the largest share.
#include <weft/stores/etcd_store.hpp>
#include <weft/groups/group.hpp>
#include <weft/stores/pmix_store.hpp>
#include <weft/stores/tcp_store.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double ms(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}

/// A store that forwards to another and records what it was asked.
class Recording final : public weft::Store {
public:
    explicit Recording(std::shared_ptr<weft::Store> inner) : inner_(std::move(inner)) {}

    using Store::barrier;
    using Store::get;
    using Store::set;
    using Store::set_while_alive;
    void set(std::string_view key, std::span<const std::byte> value) override
    {
        calls_.push_back({'s', {std::string(key)}, {value.begin(), value.end()}, 0});
        inner_->set(key, value);
    }
    void set_while_alive(std::string_view key, std::span<const std::byte> value) override
    {
        calls_.push_back({'w', {std::string(key)}, {value.begin(), value.end()}, 0});
        inner_->set_while_alive(key, value);
    }
    std::vector<std::byte> get(std::string_view key, weft::Deadline deadline) override
    {
        calls_.push_back({'g', {std::string(key)}, {}, 0});
        return inner_->get(key, deadline);
    }
    std::vector<std::vector<std::byte>> get(std::span<const std::string> keys,
                                            weft::Deadline deadline) override
    {
        calls_.push_back({'m', {keys.begin(), keys.end()}, {}, 0});
        return inner_->get(keys, deadline);
    }
    std::vector<std::optional<std::vector<std::byte>>>
    get_now(std::span<const std::string> keys) override
    {
        calls_.push_back({'n', {keys.begin(), keys.end()}, {}, 0});
        return inner_->get_now(keys);
    }
    bool live(std::string_view key) override
    {
        calls_.push_back({'l', {std::string(key)}, {}, 0});
        return inner_->live(key);
    }
    std::vector<bool> live_each(std::span<const std::string> keys) override
    {
        calls_.push_back({'L', {keys.begin(), keys.end()}, {}, 0});
        return inner_->live_each(keys);
    }
    std::int64_t add(std::string_view key, std::int64_t delta) override
    {
        calls_.push_back({'a', {std::string(key)}, {}, 0});
        return inner_->add(key, delta);
    }
    std::vector<bool> contains_each(std::span<const std::string> keys) override
    {
        calls_.push_back({'C', {keys.begin(), keys.end()}, {}, 0});
        return inner_->contains_each(keys);
    }
    bool contains(std::string_view key) override
    {
        calls_.push_back({'c', {std::string(key)}, {}, 0});
        return inner_->contains(key);
    }
    bool erase(std::string_view key) override { return inner_->erase(key); }
    void barrier(std::string_view key, std::size_t size, weft::Deadline deadline,
                 const Watch& watch) override
    {
        calls_.push_back({'b', {std::string(key)}, {}, size});
        inner_->barrier(key, size, deadline, watch);
    }
    void barrier_among(std::string_view key, std::span<const std::uint32_t> ranks,
                       weft::Deadline deadline, const Watch& watch) override
    {
        calls_.push_back({'b', {std::string(key)}, {}, ranks.size()});
        inner_->barrier_among(key, ranks, deadline, watch);
    }
    std::string describe() const override { return inner_->describe(); }

    /// Makes the recorded calls again (barriers on fresh keys, adds skipped:
    /// a barrier's count is its own), and returns how long they took. Each
    /// barrier is timed from a barrier before it that is not: its time is its
    /// own, not the wait for ranks that replay more calls than this one.
    /// `by_call`: the time of each kind of call ("b 3x 12.0 ms, m 1x 2.0 ms").
    double replay(std::string& by_call)
    {
        std::map<char, std::pair<int, double>> kinds;
        const auto calls = std::exchange(calls_, {});
        const auto deadline = weft::Deadline::after(60s);
        double took = 0;
        int barriers = 0;
        for (const Call& c : calls) {
            const std::string fresh =
                c.op == 'b' ? c.keys[0] + "-replay-" + std::to_string(barriers) : "";
            if (c.op == 'b')
                inner_->barrier(fresh + "-sync", c.size, deadline);
            const auto t = Clock::now();
            switch (c.op) {
            case 's': inner_->set(c.keys[0], c.value); break;
            case 'w': inner_->set_while_alive(c.keys[0], c.value); break;
            case 'g': (void)inner_->get(c.keys[0], deadline); break;
            case 'm': (void)inner_->get(c.keys, deadline); break;
            case 'n': (void)inner_->get_now(c.keys); break;
            case 'l': (void)inner_->live(c.keys[0]); break;
            case 'L': (void)inner_->live_each(c.keys); break;
            case 'C': (void)inner_->contains_each(c.keys); break;
            case 'c': (void)inner_->contains(c.keys[0]); break;
            case 'b':
                inner_->barrier(fresh, c.size, deadline);
                ++barriers;
                break;
            default: break;
            }
            const double one = ms(t, Clock::now());
            took += one;
            kinds[c.op].first += 1;
            kinds[c.op].second += one;
        }
        for (const auto& [op, k] : kinds)
            by_call += fmt::format("{}{} {}x {:.1f} ms", by_call.empty() ? "" : ", ", op,
                                   k.first, k.second);
        return took;
    }
    std::shared_ptr<weft::Store> inner() const { return inner_; }

private:
    struct Call {
        char op;
        std::vector<std::string> keys;
        std::vector<std::byte> value;
        std::size_t size;
    };
    std::shared_ptr<weft::Store> inner_;
    std::vector<Call> calls_;
};

/// The store this rank was launched with, as Group::from_environment finds it.
std::shared_ptr<weft::Store> launched_store(std::uint32_t& rank, std::uint32_t& size)
{
    if (weft::PmixStore::launched()) {
        auto s = std::make_shared<weft::PmixStore>();
        rank = s->rank();
        size = s->size();
        return s;
    }
    rank = static_cast<std::uint32_t>(std::atoi(std::getenv("WEFT_RANK")));
    size = static_cast<std::uint32_t>(std::atoi(std::getenv("WEFT_SIZE")));
    if (const char* at = std::getenv("WEFT_ETCD")) {
        const std::string prefix = std::string("weft-job/") + std::getenv("WEFT_JOB") + "/";
        // WEFT_ETCD_TTL as Group::from_environment reads it (bench/wireup sets it).
        const char* ttl = std::getenv("WEFT_ETCD_TTL");
        return std::make_shared<weft::EtcdStore>(at, weft::Deadline::after(60s), prefix,
                                                 std::chrono::seconds(ttl ? std::atoi(ttl) : 2));
    }
    return std::make_shared<weft::TcpStore>(std::getenv("WEFT_STORE"), weft::Deadline::after(60s));
}

} // namespace

int main(int argc, char** argv)
{
    const auto start = Clock::now();
    try {
        weft::Options o;
        o.provider = argc > 1 ? argv[1] : "tcp;ofi_rxm";
        o.kind = std::strchr(o.provider.c_str(), ';') ? weft::EndpointKind::rdm
                                                      : weft::EndpointKind::msg;
        o.node = "127.0.0.1";
        // Many ranks share few cores: a waiting rank sleeps (a spinning one,
        // and its progress thread every 100 µs, take the cores from the rest).
        if (const char* w = std::getenv("WEFT_WIREUP_SPIN"); !w || *w != '1')
            o.waiting = weft::Waiting::sleep;
        std::uint32_t rank = 0, size = 1;
        auto store = std::make_shared<Recording>(launched_store(rank, size));
        weft::Group g = weft::Group::join(store, rank, size, o, weft::Deadline::after(300s));
        const auto joined = Clock::now();
        weft::Node& node = g.node();
        auto src = node.allocate(64, weft::Access::local);
        int ctx = 0;
        if (g.size() > 1) {
            node.send(g.peer((g.rank() + 1) % g.size()), src->slice(0, 64), &ctx);
            (void)node.wait_for(weft::Op::recv, weft::Deadline::after(120s));
            (void)node.wait(&ctx, weft::Deadline::after(120s));
        }
        const auto reached = Clock::now();
        g.barrier(weft::Deadline::after(120s));
        // Each rank's replay, against its own time to reach its neighbour.
        std::string by_call;
        const double own = store->replay(by_call);
        const double share = 100 * own / ms(start, reached);
        const std::string mine = fmt::format("{} {} {}", share, own, by_call);
        auto& s = *store->inner();
        s.set("share/" + std::to_string(rank), mine);
        if (rank == 0) {
            double worst = 0, worst_ms = 0;
            std::string worst_calls;
            for (std::uint32_t r = 0; r < size; ++r) {
                const std::string t = s.get_text("share/" + std::to_string(r),
                                                 weft::Deadline::after(60s));
                const double v = std::stod(t);
                if (v > worst) {
                    worst = v;
                    const std::size_t second = t.find(' ') + 1;
                    worst_ms = std::stod(t.substr(second));
                    worst_calls = t.substr(t.find(' ', second) + 1);
                }
            }
            std::printf("weft group on %s, %u ranks through the %s: joined %.1f ms, ring %.1f ms, "
                        "reached %.1f ms after main; STORE SHARE %.2f %% (the largest of any "
                        "rank: its store calls replayed take %.1f ms: %s)\n",
                        std::string(node.provider()).c_str(), g.size(), s.describe().c_str(),
                        ms(start, joined), ms(joined, reached), ms(start, reached), worst,
                        worst_ms, worst_calls.c_str());
        }
        // Nobody leaves before rank 0 has read every share (the TCP store's
        // server may be rank 0's neighbour's connection away).
        g.barrier(weft::Deadline::after(120s));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-wireup: %s\n", e.what());
        return 1;
    }
}
