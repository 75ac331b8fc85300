// SPDX-License-Identifier: MIT
// The benchmark patterns over weft's API.
#include "weft_ends.hpp"

#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "weft/weft.hpp"

namespace weft::bench {
namespace {

using namespace std::chrono;

std::uint64_t load_stamp(const std::byte* p)
{
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

/// Reads the last (up to 8) bytes, as another agent writes them.
std::uint64_t tail_stamp(const std::byte* region, std::size_t size)
{
    std::atomic_thread_fence(std::memory_order_acquire);
    if (size >= 8)
        return load_stamp(region + size - 8);
    std::uint64_t v = 0;
    std::memcpy(&v, region, size);
    return v;
}

void put_stamp(std::byte* region, std::size_t size, std::uint64_t stamp)
{
    if (size >= 8)
        std::memcpy(region + size - 8, &stamp, 8);
    else
        std::memcpy(region, &stamp, size);
}

std::uint64_t masked(std::uint64_t stamp, std::size_t size)
{
    return size >= 8 ? stamp : stamp & ((std::uint64_t{1} << (8 * size)) - 1);
}

class WeftEnd final : public End {
public:
    WeftEnd(Connection c, const Config& cfg)
        : c_(std::move(c)), cfg_(cfg)
    {
        if (!cfg_.lane)
            (void)ep(); // connected before any timed round
    }

    std::string describe() const override
    {
        return fmt::format("{} {}", c_.selection().provider(), to_string(c_.selection().kind()));
    }
    SideChannel& side() override { return c_.side(); }
    std::span<const double> iteration_times() const override { return times_.seconds(); }

    double round(const Plan& plan) override
    {
        send_plan(side(), plan, Deadline::after(cfg_.timeout));
        prepare(plan);
        times_ = {};
        const auto start = steady_clock::now();
        switch (plan.pattern) {
        case Pattern::lat_write: lat_write(plan); break;
        case Pattern::lat_read: lat_read(plan); break;
        case Pattern::lat_notify: lat_notify(plan); break;
        case Pattern::bw_write:
        case Pattern::bw_read:
        case Pattern::bw_notify:
        case Pattern::iops: windowed(plan); break;
        case Pattern::rate: rate(plan); break;
        case Pattern::cpu_write: cpu_write(plan); break;
        case Pattern::reg_cache:
        case Pattern::pool: break; // local patterns, run by run_local
        }
        if (plan.pattern == Pattern::bw_notify)
            c_.barrier(Deadline::after(cfg_.timeout)); // delivered, counted by the target
        const double seconds = duration<double>(steady_clock::now() - start).count();
        if (plan.pattern != Pattern::bw_notify)
            c_.barrier(Deadline::after(cfg_.timeout));
        return seconds;
    }

    void serve(const Plan& plan) override
    {
        server_ = true;
        prepare(plan);
        const std::size_t size = plan.size;
        switch (plan.pattern) {
        case Pattern::lat_write:
            for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
                while (tail_stamp(mine_->data(), size) != masked(i, size))
                    drain();
                // From a buffer of its own, as ucx_perftest's put pingpong:
                // a copy's cost, not the cost of reading what just came.
                put_stamp(src_->data(), size, i);
                c_.write(src_->slice(0, size), peer_, 0, &ctx_);
            }
            break;
        case Pattern::lat_notify: {
            const auto deadline = loop_deadline();
            for (std::uint64_t i = 0; i < plan.iterations; ++i) {
                (void)wait_for(Op::notify, deadline);
                c_.write_notify(mine_->slice(0, size), peer_, 0, 0, &ctx_);
                (void)wait(&ctx_, deadline);
            }
            break;
        }
        case Pattern::bw_notify: {
            const auto deadline = loop_deadline();
            for (std::uint64_t i = 0; i < plan.iterations; ++i)
                (void)wait_for(Op::notify, deadline);
            break;
        }
        default:
            break; // a passive target
        }
        // Until the client says the round is over: drive progress where the
        // provider moves data only while the target reads its queue; else
        // sleep on the side channel, as perftest's passive side does, leaving
        // the CPU to a software RDMA device's kernel work (rxe, siw).
        if (c_.domain()->quirks().target_needs_progress)
            (void)side().readable_while([&] { drain(); }, loop_deadline());
        else
            (void)side().readable_while([] {}, loop_deadline(), std::chrono::milliseconds(100));
        c_.barrier(Deadline::after(cfg_.timeout));
    }

private:
    /// Both ends: a region large enough for the plan, exchanged with the peer.
    void prepare(const Plan& plan)
    {
        const std::size_t need = region_size(plan.pattern, plan.size, plan.queue_depth);
        const bool from_file = server_ && !cfg_.file.empty() &&
                               (plan.pattern == Pattern::lat_read || plan.pattern == Pattern::bw_read ||
                                plan.pattern == Pattern::iops);
        const auto placement = cfg_.near_device ? Placement::near_device : Placement::anywhere;
        if (from_file && (!mine_ || !file_)) {
            held_.push_back(mine_);
            mine_ = MemoryRegion::map_file(c_.domain(), cfg_.file, Access::remote_read,
                                           &c_.endpoint());
            file_ = true;
            if (mine_->size() < need)
                throw std::runtime_error(fmt::format("{} holds {} B; the pattern reads {} B",
                                                     cfg_.file, mine_->size(), need));
        } else if (!from_file && (!mine_ || file_ || mine_->size() < need)) {
            held_.push_back(mine_); // exposed regions outlive the connection
            mine_ = MemoryRegion::allocate(c_.domain(), need, Access::remote_read_write,
                                           &c_.endpoint(), placement);
            src_ = MemoryRegion::allocate(c_.domain(), need, Access::local, &c_.endpoint(),
                                          placement);
            file_ = false;
        }
        if (!file_)
            std::memset(mine_->data(), 0, std::min(need, mine_->size()));
        peer_ = c_.exchange(mine_->remote(), Deadline::after(cfg_.timeout));
        c_.barrier(Deadline::after(cfg_.timeout));
    }

    void drain() { (void)poll(got_); }

    // On the same-host lane, completions come through the Node, as they do
    // for an application that uses it: its Endpoint (Node::endpoint) is the
    // escape hatch to libfabric, and taking it tells the peer that libfabric
    // may bring something too (its polls then read the provider's queue).
    // The patterns that post through the Endpoint itself take it then.
    std::size_t poll(std::span<Completion> out)
    {
        return cfg_.lane ? c_.node().poll(out) : ep().poll(out);
    }
    Completion wait(void* context, Deadline deadline)
    {
        return cfg_.lane ? c_.wait(context, deadline) : ep().wait(context, deadline);
    }
    Completion wait_for(Op op, Deadline deadline)
    {
        return cfg_.lane ? c_.wait_for(op, deadline) : ep().wait_for(op, deadline);
    }
    Endpoint& ep()
    {
        if (ep_ == nullptr) [[unlikely]] {
            ep_ = &c_.endpoint();
            to_ = c_.peer();
        }
        return *ep_;
    }

    void lat_write(const Plan& plan)
    {
        const std::size_t size = plan.size;
        times_.start(plan.iterations);
        for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
            put_stamp(src_->data(), size, i);
            c_.write(src_->slice(0, size), peer_, 0, &ctx_);
            while (tail_stamp(mine_->data(), size) != masked(i, size))
                drain();
            times_.lap();
        }
        times_.stop();
    }

    /// One deadline per timed loop: Deadline::after reads the clock, which is a
    /// system call where the clock source has no vDSO (the lab's TCG guest;
    /// QUIRKS.md has the cost), and perftest reads none.
    Deadline loop_deadline() const { return Deadline::after(cfg_.timeout + cfg_.budget); }

    void lat_read(const Plan& plan)
    {
        const auto deadline = loop_deadline();
        times_.start(plan.iterations);
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            c_.read(src_->slice(0, plan.size), peer_, 0, &ctx_);
            (void)wait(&ctx_, deadline);
            times_.lap();
        }
        times_.stop();
    }

    void lat_notify(const Plan& plan)
    {
        const auto deadline = loop_deadline();
        times_.start(plan.iterations);
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            c_.write_notify(src_->slice(0, plan.size), peer_, 0, 0, &ctx_);
            (void)wait_for(Op::notify, deadline);
            (void)wait(&ctx_, deadline);
            times_.lap();
        }
        times_.stop();
    }

    void windowed(const Plan& plan)
    {
        const std::size_t size = plan.size;
        const std::uint64_t depth = std::max<std::uint64_t>(1, plan.queue_depth);
        std::uint64_t posted = 0, done = 0;
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        const std::uint64_t blocks = iops_region / size;
        std::array<Completion, 16> got;
        while (done < plan.iterations) {
            while (posted < plan.iterations && posted - done < depth) {
                switch (plan.pattern) {
                case Pattern::bw_write: c_.write(src_->slice(0, size), peer_, 0, &ctx_); break;
                case Pattern::bw_read: c_.read(src_->slice(0, size), peer_, 0, &ctx_); break;
                case Pattern::bw_notify:
                    c_.write_notify(src_->slice(0, size), peer_, 0, 0, &ctx_);
                    break;
                default: { // iops: reads at random block offsets
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    const std::uint64_t off = (x % blocks) * size;
                    c_.read(src_->slice(off, size), peer_, off, &ctx_);
                }
                }
                ++posted;
            }
            const std::size_t n = poll(got);
            for (std::size_t k = 0; k < n; ++k)
                done += got[k].context == &ctx_;
        }
    }

    void rate(const Plan& plan)
    {
        constexpr std::size_t batch = 16;
        std::array<Endpoint::Write, batch> writes;
        for (std::size_t k = 0; k < batch; ++k)
            writes[k] = {src_->slice(k * plan.size, plan.size), k * plan.size};
        const std::uint64_t window = std::max<std::uint64_t>(1, plan.queue_depth / batch);
        std::uint64_t posted = 0, signaled = 0, done = 0;
        std::array<Completion, 16> got;
        while (done < signaled || posted < plan.iterations) {
            while (posted < plan.iterations && signaled - done < window) {
                signaled += ep().write_batch(writes, peer_, &ctx_, batch, to_);
                posted += batch;
            }
            const std::size_t n = poll(got);
            for (std::size_t k = 0; k < n; ++k)
                done += got[k].context == &ctx_;
        }
    }

    /// The same work as the raw loop: an inline write (no completion to reap,
    /// Endpoint::write_inject) up to the inject size, else a write and its
    /// completion, with a deadline.
    void cpu_write(const Plan& plan)
    {
        if (plan.size <= ep().inject_size()) {
            const auto bytes = std::span<const std::byte>(src_->data(), plan.size);
            for (std::uint64_t i = 0; i < plan.iterations; ++i)
                ep().write_inject(bytes, peer_, 0, to_);
            return;
        }
        const auto deadline = loop_deadline();
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            c_.write(src_->slice(0, plan.size), peer_, 0, &ctx_);
            (void)wait(&ctx_, deadline);
        }
    }

    // Regions first: exposed memory outlives the connection that exposes it.
    std::vector<std::shared_ptr<MemoryRegion>> held_;
    std::shared_ptr<MemoryRegion> mine_;
    std::shared_ptr<MemoryRegion> src_;
    Connection c_;
    const Config& cfg_;
    Endpoint* ep_ = nullptr; // ep()
    Peer to_;                // the peer's address on ep_
    RemoteRegion peer_;
    IterationTimes times_; ///< the client's lat-* loops: each iteration's time
    std::array<Completion, 16> got_; // not re-initialised on every poll
    int ctx_ = 0;
    bool server_ = false;
    bool file_ = false;
};

} // namespace

Options options_for(const Config& cfg)
{
    Options o;
    o.provider = cfg.provider;
    o.kind = cfg.kind;
    o.allow_shm = cfg.allow_shm;
    o.same_host = cfg.lane ? SameHost::lane : SameHost::off;
    o.node = cfg.node;
    o.progress = Progress::polling; // both ends poll all the time
    if (cfg.progress_cpu) {
        o.progress = Progress::thread;
        o.progress_cpu = cfg.progress_cpu;
    }
    return o;
}

Factory weft_factory()
{
    return Factory{
        "weft",
        [](const Config& cfg, SideListener& listener) -> std::unique_ptr<End> {
            Server server(options_for(cfg), std::move(listener));
            return std::make_unique<WeftEnd>(server.accept(Deadline::after(cfg.timeout)), cfg);
        },
        [](const Config& cfg, const std::string& host_port) -> std::unique_ptr<End> {
            Options o = options_for(cfg);
            o.provider.clear(); // the server chooses
            return std::make_unique<WeftEnd>(
                Connection::connect(host_port, o, Deadline::after(cfg.timeout)), cfg);
        },
        run_weft_local};
}

} // namespace weft::bench
