// SPDX-License-Identifier: MIT
#include "pingpong.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cpus.hpp"
#include "sizes.hpp"
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

std::string size_str(double v)
{
    if (v >= (1ull << 30))
        return fmt::format("{:.4g}g", v / (1ull << 30));
    if (v >= (1 << 20))
        return fmt::format("{:.4g}m", v / (1 << 20));
    if (v >= 1024)
        return fmt::format("{:.4g}k", v / 1024);
    return fmt::format("{:g}", v);
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
    std::array<std::byte, 18> b{};
    std::memcpy(b.data(), &p.size, 8);
    std::memcpy(b.data() + 8, &p.iterations, 8);
    b[16] = std::byte{p.verify};
    b[17] = std::byte{p.op};
    c.side().send(Frame::data, b, d);
}

Plan receive_plan(Connection& c, Deadline d)
{
    auto b = c.side().receive(Frame::data, d);
    if (b.size() != 18)
        throw std::runtime_error("malformed ping-pong plan from the client");
    Plan p;
    std::memcpy(&p.size, b.data(), 8);
    std::memcpy(&p.iterations, b.data() + 8, 8);
    p.verify = std::to_integer<std::uint8_t>(b[16]);
    p.op = std::to_integer<std::uint8_t>(b[17]);
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
        // progressing while the client reads or decides what comes next.
        while (!c.side().readable())
            ep.progress();
        const Plan plan = receive_plan(c, Deadline::after(cfg.timeout));
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
                 size_str(static_cast<double>(r.size)).c_str(),
                 size_str(static_cast<double>(r.iterations)).c_str(), size_str(bytes).c_str(),
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

// Both ends on this machine: the server in a child process forked before any
// libfabric call (forking after verbs initialisation is unsafe), the client here.
int run_both(const Config& cfg)
{
    // Loopback unless --bind names the interface (an RDMA device's address).
    const std::string host = cfg.options.node.empty() ? "127.0.0.1" : cfg.options.node;
    std::string where = "both ends on this machine (2 processes)";
    std::optional<tool::CpuPair> pinned;
    if (cfg.pin) {
        const tool::PinPlan plan = tool::plan_pinning();
        if (!plan.cpus)
            std::fprintf(stderr, "weft: %s\n", plan.why_not.c_str());
        pinned = plan.cpus;
        if (pinned)
            where = fmt::format("both ends on this machine (2 processes; server on CPU {}, "
                                "client on CPU {})",
                                pinned->server, pinned->client);
    }
    // The client's CPU first: the child inherits it, then moves to its own.
    if (pinned)
        if (const auto err = tool::pin_to(pinned->client); !err.empty())
            throw std::runtime_error(err);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        throw std::runtime_error("pipe2 failed");
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error("fork failed");
    if (pid == 0) {
        close(fds[0]);
        int status = 0;
        try {
            if (pinned)
                if (const auto err = tool::pin_to(pinned->server); !err.empty())
                    throw std::runtime_error(err);
            Server server(cfg.options, host, 0);
            const auto msg = fmt::format("P{}\n", server.port());
            (void)!write(fds[1], msg.data(), msg.size());
            std::shared_ptr<MemoryRegion> region;
            Connection c = server.accept(Deadline::after(cfg.timeout));
            serve(c, cfg, region);
        } catch (const std::exception& e) {
            const auto msg = fmt::format("E{}", e.what()); // the rest of the pipe, until EOF
            (void)!write(fds[1], msg.data(), msg.size());
            status = 1;
        }
        close(fds[1]);
        std::fflush(nullptr);
        _exit(status);
    }
    close(fds[1]);
    // The child says either its port or why it could not serve.
    std::string line;
    const auto deadline = Deadline::after(cfg.timeout);
    char ch = 0;
    while ((line.empty() || line[0] == 'E' || line.back() != '\n')) {
        pollfd p{fds[0], POLLIN, 0};
        if (::poll(&p, 1, deadline.remaining_ms()) <= 0 || read(fds[0], &ch, 1) != 1)
            break;
        line += ch;
    }
    auto reap = [&](bool force) {
        if (force)
            kill(pid, SIGKILL);
        int st = 0;
        const auto until = Deadline::after(cfg.timeout);
        while (waitpid(pid, &st, WNOHANG) == 0) {
            if (until.expired()) {
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                return 1;
            }
            std::this_thread::sleep_for(milliseconds(5));
        }
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    };
    if (line.empty() || line[0] != 'P') {
        close(fds[0]);
        reap(line.empty());
        throw std::runtime_error(line.empty() ? "the server process did not start in time"
                                              : "server: " + line.substr(1));
    }
    const std::string port = line.substr(1, line.size() - 2);
    int status = 0;
    try {
        Connection c = Connection::connect(host + ":" + port, cfg.options,
                                           Deadline::after(cfg.timeout));
        status = client(c, cfg, where);
    } catch (...) {
        // Prefer the server's explanation when it has one.
        line.clear();
        while (read(fds[0], &ch, 1) == 1)
            line += ch;
        close(fds[0]);
        reap(false);
        if (line.size() > 1 && line[0] == 'E')
            throw std::runtime_error("server: " + line.substr(1));
        throw;
    }
    close(fds[0]);
    const int child = reap(false);
    return status != 0 ? status : child;
}

} // namespace

void add_options(CLI::App& app, Config& cfg)
{
    auto* server = app.add_option("--server", cfg.listen,
                                  "serve one client on [HOST:]PORT (side channel; the fabric "
                                  "listens on the same host)");
    auto* connect = app.add_option("--connect", cfg.connect, "connect to a server at HOST:PORT");
    server->excludes(connect);
    server->expected(0, 1);
    app.add_option("-p,--provider", cfg.options.provider,
                   "provider: verbs, tcp, tcp;ofi_rxm, sockets, shm, net, ... (default: "
                   "WEFT_PROVIDER, else automatic)");
    app.add_flag_callback("--rdm", [&] { cfg.options.kind = EndpointKind::rdm; },
                          "reliable-datagram endpoints (default: the provider's fast path)");
    app.add_flag_callback("--msg", [&] { cfg.options.kind = EndpointKind::msg; },
                          "connection-oriented endpoints");
    app.add_flag_callback("--require-rdma", [&] { cfg.options.fallback = Fallback::require_rdma; },
                          "fail instead of falling back to a non-RDMA provider");
    app.add_flag("--shm", cfg.options.allow_shm,
                 "allow shared memory (both ends on this host)");
    app.add_option("--domain", cfg.options.domain, "pin a domain / interface (lo, eth0, rxe0)");
    app.add_option("--bind", cfg.options.node, "local address the fabric binds to");
    app.add_option_function<std::string>(
           "--op",
           [&](const std::string& v) {
               if (v == "write")
                   cfg.op = Pattern::write;
               else if (v == "read")
                   cfg.op = Pattern::read;
               else
                   throw CLI::ValidationError("--op", "write or read");
           },
           "write (write_notify there and back, default) or read (RMA read, passive target)");
    app.add_option_function<std::string>(
           "--progress",
           [&](const std::string& v) {
               if (v == "auto")
                   cfg.options.progress = Progress::automatic;
               else if (v == "polling")
                   cfg.options.progress = Progress::polling;
               else if (v == "thread")
                   cfg.options.progress = Progress::thread;
               else
                   throw CLI::ValidationError("--progress", "auto, polling or thread");
           },
           "who drives progress: polling (default: both ends poll), auto, thread");
    tool::add_size_option(app, "--min-size", cfg.min_size, "smallest transfer, e.g. 64k (default 8)");
    tool::add_size_option(app, "--max-size", cfg.max_size, "largest transfer, e.g. 4m (default 1m)");
    tool::add_count_option(app, "-n,--iters", cfg.iterations,
                           "iterations per size, at most (default 1000)");
    app.add_option_function<int>(
           "--budget-ms", [&](int v) { cfg.budget = milliseconds(v); },
           "time per size, at most (default 500)")
        ->check(CLI::Range(1, 3'600'000).description(""))
        ->type_name("MS");
    app.add_flag("--pin", cfg.pin,
                 "both ends on this machine: the server on the first CPU this process may use, "
                 "the client on the second");
    app.add_flag_callback("--no-verify", [&] { cfg.verify = false; },
                          "do not check the data (it is checked by default)");
    app.add_option_function<int>(
           "--timeout", [&](int v) { cfg.timeout = seconds(v); },
           "seconds any single wait may take (default 30)")
        ->check(CLI::Range(1, 86'400).description(""))
        ->type_name("SECONDS");
    app.add_flag("-q,--quiet", cfg.quiet, "print nothing on success");
    app.callback([&, server, connect] {
        if (*server)
            cfg.role = Role::server;
        else if (*connect)
            cfg.role = Role::client;
        if (cfg.min_size > cfg.max_size)
            throw CLI::ValidationError(
                "--min-size", fmt::format("{} B is more than --max-size ({} B)", cfg.min_size,
                                          cfg.max_size));
        if (cfg.pin && cfg.role != Role::both)
            throw CLI::ValidationError("--pin", "places both ends of a run on this machine; "
                                                "with --server or --connect, start each end "
                                                "under `taskset -c CPU`");
    });
}

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
