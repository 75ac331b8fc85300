// SPDX-License-Identifier: MIT
// weft-fanout-bench: what a way of waiting (Options::waiting) costs where
// processes outnumber cores, and where they do not.
//
//   weft-fanout-bench [-p PROVIDER] [--readers N] [--block BYTES] [--seconds S]
//                     [--waiting spin,adaptive,...] [--rounds R] [--pingpong]
//
// Fan-out (the default): this process writes blocks with a notification to N
// reader processes in turn, each write waited for; readers wait for each
// notification. Prints blocks per second. --pingpong: one reader, 8 B
// write_notify there and back; prints the one-way latency (half a round
// trip). Every waiting mode runs in each of R rounds, interleaved, and the
// median of the rounds is printed beside each mode's ratio to the first mode.
// Readers are forked before any libfabric call here and use the same waiting
// mode. A program, not a test: it prints numbers and asserts nothing.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "weft/weft.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

struct Config {
    std::string provider = "shm";
    int readers = 2;
    std::size_t block = 64u << 10;
    double seconds = 2;
    int rounds = 3;
    bool pingpong = false;
};

Options options_for(const Config& cfg, Waiting w)
{
    Options o;
    o.provider = cfg.provider;
    o.allow_shm = true;
    o.node = "127.0.0.1";
    o.waiting = w;
    return o;
}

/// A reader: serves one writer until it goes (its side channel closes).
int reader(const Config& cfg, Waiting w, int port_fd)
{
    try {
        Server server(options_for(cfg, w), "127.0.0.1", 0);
        const std::uint16_t port = server.port();
        if (::write(port_fd, &port, sizeof port) != sizeof port)
            return 1;
        ::close(port_fd);
        std::vector<std::shared_ptr<MemoryRegion>> held;
        Connection c = server.accept(Deadline::after(60s));
        auto inbox = held.emplace_back(c.allocate(std::max<std::size_t>(cfg.block, 64), Access::remote_write));
        const RemoteRegion back = c.exchange(inbox->remote(), Deadline::after(30s));
        auto src = c.allocate(8, Access::local);
        int ctx = 0;
        for (;;) {
            (void)c.wait_for(Op::notify, Deadline::after(60s));
            if (cfg.pingpong) {
                c.write_notify(src->slice(0, 8), back, 0, 1, &ctx);
                (void)c.wait(&ctx, Deadline::after(30s));
            }
        }
    } catch (const Error& e) {
        return e.peer_lost() ? 0 : (std::fprintf(stderr, "reader: %s\n", e.what()), 1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "reader: %s\n", e.what());
        return 1;
    }
}

/// One run of `w`: blocks per second (fan-out) or one-way microseconds (ping-pong).
double run(const Config& cfg, Waiting w)
{
    const int n = cfg.pingpong ? 1 : cfg.readers;
    std::vector<pid_t> pids;
    std::vector<std::uint16_t> ports;
    for (int i = 0; i < n; ++i) {
        int fds[2];
        if (::pipe(fds) != 0)
            throw std::runtime_error("pipe failed");
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::close(fds[0]);
            ::_exit(reader(cfg, w, fds[1]));
        }
        ::close(fds[1]);
        std::uint16_t port = 0;
        if (::read(fds[0], &port, sizeof port) != sizeof port)
            throw std::runtime_error("a reader did not start");
        ::close(fds[0]);
        pids.push_back(pid);
        ports.push_back(port);
    }
    double result = 0;
    {
        std::vector<Connection> to;
        std::vector<RemoteRegion> inbox;
        std::vector<std::shared_ptr<MemoryRegion>> mine;
        for (const auto port : ports) {
            to.push_back(Connection::connect(fmt::format("127.0.0.1:{}", port), options_for(cfg, w),
                                             Deadline::after(60s)));
            auto& m = mine.emplace_back(to.back().allocate(64, Access::remote_write));
            inbox.push_back(to.back().exchange(m->remote(), Deadline::after(30s)));
        }
        const std::size_t len = cfg.pingpong ? 8 : cfg.block;
        std::vector<std::shared_ptr<MemoryRegion>> src;
        for (auto& c : to)
            src.push_back(c.allocate(len, Access::local));
        int ctx = 0;
        std::uint64_t done = 0;
        const auto step = [&] {
            for (std::size_t r = 0; r < to.size(); ++r) {
                to[r].write_notify(src[r]->slice(0, len), inbox[r], 0, 1, &ctx);
                (void)to[r].wait(&ctx, Deadline::after(30s));
                if (cfg.pingpong)
                    (void)to[r].wait_for(Op::notify, Deadline::after(30s));
                ++done;
            }
        };
        for (const auto warm = Clock::now() + 200ms; Clock::now() < warm;)
            step();
        done = 0;
        const auto start = Clock::now();
        const auto until = start + std::chrono::duration<double>(cfg.seconds);
        while (Clock::now() < until)
            step();
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        result = cfg.pingpong ? s * 1e6 / double(done) / 2 : double(done) / s;
    } // the connections close: the readers end
    for (const pid_t pid : pids)
        ::waitpid(pid, nullptr, 0);
    return result;
}

} // namespace

int main(int argc, char** argv)
{
    CLI::App app{"blocks per second to N readers, or ping-pong latency, per waiting mode"};
    Config cfg;
    std::vector<std::string> modes{"spin", "adaptive"};
    app.add_option("-p,--provider", cfg.provider, "libfabric provider (both ends on this host)");
    app.add_option("--readers", cfg.readers, "reader processes (fan-out)")->check(CLI::Range(1, 64));
    app.add_option("--block", cfg.block, "bytes a block")->check(CLI::Range(1, 1 << 26));
    app.add_option("--seconds", cfg.seconds, "seconds a run")->check(CLI::Range(0.1, 600.0));
    app.add_option("--rounds", cfg.rounds, "rounds, each running every mode")->check(CLI::Range(1, 100));
    app.add_option("--waiting", modes, "waiting modes: spin, adaptive, yield, sleep")->delimiter(',');
    app.add_flag("--pingpong", cfg.pingpong, "one reader, 8 B there and back: one-way latency");
    CLI11_PARSE(app, argc, argv);
    const std::map<std::string, Waiting> known{{"spin", Waiting::spin},
                                               {"adaptive", Waiting::adaptive},
                                               {"yield", Waiting::yield},
                                               {"sleep", Waiting::sleep}};
    for (const auto& m : modes)
        if (!known.contains(m)) {
            std::fprintf(stderr, "weft-fanout-bench: unknown waiting mode '%s' (spin, adaptive, "
                                 "yield, sleep)\n", m.c_str());
            return 2;
        }
    std::printf("# %s, %s, %s, %d round(s) of %.1f s, modes interleaved\n", cfg.provider.c_str(),
                cfg.pingpong ? "ping-pong 8 B (one-way us)"
                             : fmt::format("{} readers, {} B blocks (blocks/s)", cfg.readers, cfg.block).c_str(),
                fmt::format("{} cores", ::sysconf(_SC_NPROCESSORS_ONLN)).c_str(), cfg.rounds,
                cfg.seconds);
    std::map<std::string, std::vector<double>> got;
    try {
        for (int r = 0; r < cfg.rounds; ++r)
            for (const auto& m : modes) {
                const double v = run(cfg, known.at(m));
                got[m].push_back(v);
                std::printf("round %d %-9s %12.2f\n", r + 1, m.c_str(), v);
                std::fflush(stdout);
            }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-fanout-bench: %s\n", e.what());
        return 1;
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double first = median(got[modes[0]]);
    for (const auto& m : modes) {
        const double med = median(got[m]);
        std::printf("median %-9s %12.2f  (%.2fx %s)\n", m.c_str(), med, med / first, modes[0].c_str());
    }
}
