// SPDX-License-Identifier: MIT
#include "pingpong.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "cpus.hpp"
#include "fork_pair.hpp"
#include "sizes.hpp"
#include "socket.hpp"
#include "wire.hpp"
#include "weft/weft.hpp"

namespace weft::pingpong {
namespace {

using namespace std::chrono;

// ---- data pattern: a fixed pseudo-random block, stamped per iteration so that
// stale data is caught as surely as corrupted data ----

std::vector<std::byte> make_pattern(std::size_t n)
{
    std::vector<std::byte> p(n);
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& b : p) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b = static_cast<std::byte>(x);
    }
    return p;
}

void stamp(std::byte* p, const std::byte* base, std::size_t size, std::uint64_t iter) noexcept
{
    const std::size_t n = std::min<std::size_t>(8, size);
    const std::uint64_t tail = (iter + 1) * 0x9E3779B97F4A7C15ull;
    for (std::size_t k = 0; k < n; ++k) {
        p[k] = base[k] ^ static_cast<std::byte>((iter + 1) >> (8 * k));
        p[size - 1 - k] = base[size - 1 - k] ^ static_cast<std::byte>(tail >> (8 * k));
    }
}

void unstamp(std::byte* p, const std::byte* base, std::size_t size) noexcept
{
    const std::size_t n = std::min<std::size_t>(8, size);
    for (std::size_t k = 0; k < n; ++k) {
        p[k] = base[k];
        p[size - 1 - k] = base[size - 1 - k];
    }
}

void check(const std::byte* got, const std::byte* want, std::size_t size, std::uint64_t iter,
           const char* where)
{
    if (std::memcmp(got, want, size) == 0) [[likely]]
        return;
    std::size_t i = 0;
    while (got[i] == want[i])
        ++i;
    throw std::runtime_error(fmt::format(
        "data check failed {}: byte {} of a {} B transfer in iteration {} is {:#04x}, expected "
        "{:#04x}",
        where, i, size, iter, std::to_integer<unsigned>(got[i]), std::to_integer<unsigned>(want[i])));
}

std::vector<std::size_t> sweep(std::size_t lo, std::size_t hi)
{
    std::vector<std::size_t> out;
    for (std::size_t s = std::max<std::size_t>(1, lo); s <= hi; s = s * 2)
        out.push_back(s);
    return out;
}

// A round: the client tells the server how many iterations of which size come.
struct Plan {
    std::uint64_t size = 0; // 0 ends the session
    std::uint64_t iterations = 0;
    std::uint8_t verify = 1;
    std::uint8_t op = 0;
};

void send_plan(Connection& c, const Plan& p, Deadline d)
{
    wire::Writer w;
    w.u64(p.size);
    w.u64(p.iterations);
    w.u8(p.verify);
    w.u8(p.op);
    c.side().send(w.data(), d);
}

Plan receive_plan(Connection& c, Deadline d)
{
    const auto b = c.side().receive(d);
    wire::Reader r(b, "ping-pong plan", "weft pingpong");
    Plan p;
    p.size = r.u64();
    p.iterations = r.u64();
    p.verify = r.u8();
    p.op = r.u8();
    r.finish();
    return p;
}

// ---- server ----

/// `region` is the caller's, so that it outlives the connection: a target's
/// provider may touch exposed memory after the initiator saw its completion.
void serve(Connection& c, const Config& cfg, std::shared_ptr<MemoryRegion>& region)
{
    Endpoint& ep = c.endpoint();
    const auto pattern = make_pattern(cfg.max_size);
    region = c.allocate(cfg.max_size, Access::remote_read_write);
    std::memcpy(region->data(), pattern.data(), cfg.max_size); // what readers see
    auto expect = pattern;
    const RemoteRegion peer = c.exchange(region->remote(), Deadline::after(cfg.timeout));
    int ctx = 0;
    for (;;) {
        // Between rounds the server is a passive target: keep the endpoint
        // progressing while the client reads (a round takes the budget at
        // most) or decides what comes next; receive_plan() reports a timeout.
        const auto next = Deadline::after(cfg.timeout + cfg.budget);
        (void)c.side().readable_while([&] { ep.progress(); }, next);
        const Plan plan = receive_plan(c, next);
        if (plan.size == 0)
            break;
        if (plan.size > cfg.max_size)
            throw std::runtime_error(fmt::format("the client asks for {} B but this server "
                                                 "serves at most {} B (--max-size)",
                                                 plan.size, cfg.max_size));
        if (plan.op == static_cast<std::uint8_t>(Pattern::read))
            continue; // reads need nothing from the target
        const auto size = static_cast<std::size_t>(plan.size);
        const Local data = region->slice(0, size);
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            const auto d = Deadline::after(cfg.timeout);
            const Completion n = ep.wait_for(Op::notify, d);
            if (n.data != static_cast<std::uint32_t>(i))
                throw std::runtime_error(fmt::format("notification {} arrived, {} expected",
                                                     n.data, i));
            if (plan.verify) {
                stamp(expect.data(), pattern.data(), size, i);
                check(region->data(), expect.data(), size, i, "at the server");
                unstamp(expect.data(), pattern.data(), size);
            }
            c.write_notify(data, peer, 0, static_cast<std::uint32_t>(i), &ctx);
            (void)ep.wait(&ctx, d);
        }
    }
}

// ---- client ----

struct Row {
    std::size_t size;
    std::uint64_t iterations;
    double seconds;
};

class Client {
public:
    Client(Connection& c, const Config& cfg)
        : c_(c), cfg_(cfg), ep_(c.endpoint()), pattern_(make_pattern(cfg.max_size)),
          src_(c.allocate(cfg.max_size, Access::local)),
          sink_(c.allocate(cfg.max_size, Access::remote_write))
    {
        std::memcpy(src_->data(), pattern_.data(), cfg.max_size);
        peer_ = c.exchange(sink_->remote(), Deadline::after(cfg.timeout));
    }

    double round(std::size_t size, std::uint64_t iterations)
    {
        send_plan(c_, {size, iterations, cfg_.verify, static_cast<std::uint8_t>(cfg_.op)},
                  Deadline::after(cfg_.timeout));
        const auto start = steady_clock::now();
        if (cfg_.op == Pattern::write)
            writes(size, iterations);
        else
            reads(size, iterations);
        return duration<double>(steady_clock::now() - start).count();
    }

    void finish() { send_plan(c_, {}, Deadline::after(cfg_.timeout)); }

private:
    void writes(std::size_t size, std::uint64_t iterations)
    {
        const Local src = src_->slice(0, size);
        for (std::uint64_t i = 0; i < iterations; ++i) {
            const auto d = Deadline::after(cfg_.timeout);
            if (cfg_.verify)
                stamp(src_->data(), pattern_.data(), size, i);
            c_.write_notify(src, peer_, 0, static_cast<std::uint32_t>(i), &ctx_);
            (void)ep_.wait(&ctx_, d);
            const Completion n = ep_.wait_for(Op::notify, d);
            if (n.data != static_cast<std::uint32_t>(i))
                throw std::runtime_error(fmt::format("notification {} arrived, {} expected",
                                                     n.data, i));
            if (cfg_.verify) {
                check(sink_->data(), src_->data(), size, i, "at the client");
                unstamp(src_->data(), pattern_.data(), size);
            }
        }
    }

    void reads(std::size_t size, std::uint64_t iterations)
    {
        const Local sink = sink_->slice(0, size);
        for (std::uint64_t i = 0; i < iterations; ++i) {
            if (cfg_.verify)
                std::memset(sink_->data(), 0, size);
            c_.read(sink, peer_, 0, &ctx_);
            (void)ep_.wait(&ctx_, Deadline::after(cfg_.timeout));
            if (cfg_.verify)
                check(sink_->data(), pattern_.data(), size, i, "after the read");
        }
    }

    Connection& c_;
    const Config& cfg_;
    Endpoint& ep_;
    std::vector<std::byte> pattern_;
    std::shared_ptr<MemoryRegion> src_;
    std::shared_ptr<MemoryRegion> sink_;
    RemoteRegion peer_;
    int ctx_ = 0;
};

void print_header(std::FILE* out)
{
    std::fprintf(out, "%-10s%-8s%-8s%8s %10s%13s%13s\n", "bytes", "iters", "total", "time",
                 "MB/sec", "usec/xfer", "Mxfers/sec");
}

void print_row(std::FILE* out, const Row& r, int xfers_per_iter)
{
    const double xfers = static_cast<double>(r.iterations) * xfers_per_iter;
    const double bytes = xfers * static_cast<double>(r.size);
    std::fprintf(out, "%-10s%-8s%-8s%7.2fs %10.2f%13.2f%13.2f\n",
                 tool::size_text(static_cast<double>(r.size)).c_str(),
                 tool::size_text(static_cast<double>(r.iterations)).c_str(), tool::size_text(bytes).c_str(),
                 r.seconds, bytes / r.seconds / 1e6, r.seconds * 1e6 / xfers,
                 xfers / r.seconds / 1e6);
    std::fflush(out);
}

int client(Connection& c, const Config& cfg, std::string_view where)
{
    std::FILE* out = stdout;
    const auto& sel = c.selection();
    if (!cfg.quiet) {
        std::fprintf(out, "%s", c.peer_report().c_str());
        std::fprintf(out, "weft: rma pingpong (%s), %s: provider %s, %s endpoint, %s\n",
                     cfg.op == Pattern::write ? "write_notify there and back"
                                              : "RMA read from a passive target",
                     std::string(where).c_str(), std::string(sel.provider()).c_str(),
                     std::string(to_string(sel.kind())).c_str(),
                     cfg.verify ? "every byte verified in every iteration" : "data not verified");
        print_header(out);
    }
    Client cl(c, cfg);
    const int xfers = cfg.op == Pattern::write ? 2 : 1;
    for (const std::size_t size : sweep(cfg.min_size, cfg.max_size)) {
        // Warm up, and size the timed round to the per-size budget.
        const std::uint64_t warm = std::min<std::uint64_t>(10, cfg.iterations);
        const double t = cl.round(size, warm);
        const double per = t / static_cast<double>(warm);
        const auto budget = duration<double>(cfg.budget).count();
        std::uint64_t n = cfg.iterations;
        if (per > 0 && per * static_cast<double>(n) > budget)
            n = std::max<std::uint64_t>(warm, static_cast<std::uint64_t>(budget / per));
        const Row row{size, n, cl.round(size, n)};
        if (!cfg.quiet)
            print_row(out, row, xfers);
    }
    cl.finish();
    return 0;
}

int run_server(const Config& cfg)
{
    const auto [host, port] = split_host_port(cfg.listen);
    Server server(cfg.options, host, port);
    std::fprintf(stdout, "%sweft: waiting for a client on %s:%u\n", server.selection().report().c_str(),
                 host.c_str(), server.port());
    std::fflush(stdout);
    std::shared_ptr<MemoryRegion> region;
    Connection c = server.accept(Deadline::after(std::chrono::hours(24)));
    serve(c, cfg, region);
    std::fprintf(stdout, "weft: client %s done\n", c.side().peer().c_str());
    return 0;
}

int run_client(const Config& cfg)
{
    Connection c = Connection::connect(cfg.connect, cfg.options, Deadline::after(cfg.timeout));
    return client(c, cfg, fmt::format("client of {}", cfg.connect));
}

// Both ends on this machine: the server in a child process (tool::fork_pair),
// the client here.
int run_both(const Config& cfg)
{
    // Loopback unless --bind names the interface (an RDMA device's address).
    const std::string host = cfg.options.node.empty() ? "127.0.0.1" : cfg.options.node;
    std::string where = "both ends on this machine (2 processes)";
    const std::optional<tool::CpuPair> pinned =
        cfg.pin ? tool::pinned_pair("weft") : std::nullopt;
    if (pinned)
        where = fmt::format("both ends on this machine (2 processes; server on CPU {}, "
                            "client on CPU {})",
                            pinned->server, pinned->client);
    return tool::fork_pair(
        host, cfg.timeout, pinned,
        [&](const tool::Announce& announce) {
            Server server(cfg.options, host, 0);
            const std::uint16_t port = server.port();
            announce(std::span(&port, 1));
            std::shared_ptr<MemoryRegion> region;
            Connection c = server.accept(Deadline::after(cfg.timeout));
            serve(c, cfg, region);
        },
        [&](const std::vector<std::string>& at) {
            Connection c = Connection::connect(at[0], cfg.options, Deadline::after(cfg.timeout));
            return client(c, cfg, where);
        });
}

} // namespace

int run(const Config& cfg)
{
    // Both ends poll all the time, a passive server too (serve()).
    tool::warn_if_oversubscribed("weft", cfg.role == Role::both ? 2 : 1);
    switch (cfg.role) {
    case Role::server: return run_server(cfg);
    case Role::client: return run_client(cfg);
    case Role::both: break;
    }
    return run_both(cfg);
}

} // namespace weft::pingpong
