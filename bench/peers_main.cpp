// SPDX-License-Identifier: MIT
// weft-peers-bench: what a peer costs a process that reaches many, on weft's
// Node beside raw libfabric doing the same (fi_av_insert, or an accepted MSG
// endpoint on one queue, and a first message each way).
//
//   weft-peers-bench [-p PROVIDER] [-k msg|rdm] [-n 1,8,32,128] [-r REPEATS]
//
// For each N, a hub process (fresh each time, so no earlier round's heap is
// reused) starts N peer processes; each opens its endpoint and sends the hub
// its address; the hub opens its own and measures itself (RSS, descriptors,
// threads); then it adds every peer, releases them, and each peer sends a
// hello that the hub answers. The time is from the release to the last
// answer completing; memory, descriptors and threads are the hub's growth
// over that time, per peer. weft and raw alternate, REPEATS times each, and
// the medians are printed. A program, not a test: it asserts nothing.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "peers.hpp"

namespace weft::peers {
namespace {

using namespace std::chrono_literals;

// ---- weft: a Node ----

Options options_for(const Config& c)
{
    Options o;
    o.provider = c.provider;
    o.kind = c.kind;
    o.node = "127.0.0.1";
    o.allow_shm = true;
    if (c.polling)
        o.progress = Progress::polling;
    if (c.lane)
        o.same_host = SameHost::lane;
    return o;
}

Result weft_hub(const Config& c, std::vector<Child>& children)
{
    auto node = Node::open(options_for(c));
    auto send_buffer = node->allocate(8 * children.size(), Access::local);
    node->progress(); // the provider's first progress, as the raw hub has it
    Result r;
    r.before = Usage::now();
    const auto start = Clock::now();
    for (auto& child : children)
        (void)node->add_peer(NodeAddress::decode(child.address));
    const auto name = node->address().encode();
    for (auto& child : children)
        child.release(name);
    const auto until = Deadline::after(120s);
    std::vector<int> contexts(children.size());
    for (std::size_t i = 0; i < children.size(); ++i) {
        const Completion hello = node->wait_for(Op::recv, until);
        std::uint64_t who = 0;
        std::memcpy(&who, hello.message.data(), 8);
        std::memcpy(send_buffer->data() + 8 * i, &who, 8);
        node->send(hello.peer, send_buffer->slice(8 * i, 8), &contexts[i]);
    }
    for (auto& ctx : contexts)
        (void)node->wait(&ctx, until);
    r.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    r.after = Usage::now();
    if (c.aggregate) {
        const Traffic t = traffic_hub(*node, children,
                                      c.provider == "shm" ? traffic::shm_read_nap : std::chrono::microseconds{});
        r.write_mb_s = t.write_mb_s;
        r.messages_s = t.messages_s;
        r.reads_s = t.reads_s;
    }
    for (auto& child : children)
        child.dismiss();
    return r;
}

int weft_child(const Config& c, Channel& hub_channel, std::uint32_t index)
{
    auto node = Node::open(options_for(c));
    hub_channel.send_bytes(node->address().encode());
    const PeerId hub = node->add_peer(NodeAddress::decode(hub_channel.receive_bytes()));
    auto buffer = node->allocate(8, Access::local);
    const std::uint64_t me = index;
    std::memcpy(buffer->data(), &me, 8);
    int ctx = 0;
    node->send(hub, buffer->slice(0, 8), &ctx); // MSG: connects first
    (void)node->wait(&ctx, Deadline::after(120s));
    (void)node->wait_for(Op::recv, hub, Deadline::after(120s));
    if (c.aggregate)
        traffic_child(*node, hub, hub_channel, index);
    try {
        while (!hub_channel.dismissed())
            node->progress();
    } catch (const std::exception&) {
        // the hub closed its Node first: this side is done anyway
    }
    return 0;
}

// ---- the processes ----

Result run_hub(const std::string& impl, const Config& c, int n)
{
    const Usage start = Usage::now();
    std::vector<Child> children;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe");
    for (int i = 0; i < n; ++i) {
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            throw std::runtime_error("socketpair failed");
        const detail::Fd theirs(sv[1]);
        std::vector<std::string> args{self, "--peer", impl, "-p", c.provider, "-k",
                                      c.kind == EndpointKind::msg ? "msg" : "rdm", "--index",
                                      std::to_string(i)};
        if (c.aggregate)
            args.emplace_back("--aggregate");
        if (c.polling)
            args.emplace_back("--polling");
        if (c.lane)
            args.emplace_back("--lane");
        auto process = detail::Child::spawn({.argv = std::move(args), .fds = {{sv[1], 3}}});
        children.push_back({Channel(sv[0]), std::move(process), {}});
    }
    for (auto& child : children)
        child.address = child.channel.receive_bytes();
    Result r = impl == "weft" ? weft_hub(c, children) : raw_hub(c, children);
    r.start = start;
    for (auto& child : children)
        if (child.process.finish(Deadline::after(120s)) != 0)
            throw std::runtime_error("a peer process failed");
    return r;
}

/// Runs one hub in a process of its own (fresh, so no earlier round's heap is
/// reused) and reads the `count` numbers it prints.
std::vector<double> hub_numbers(const std::string& self, const char* impl, const Config& c,
                                const std::string& kind, int n, bool aggregate, std::size_t count)
{
    std::vector<std::string> args{self, "--hub", impl, "-p", c.provider, "-k", kind, "-n",
                                  std::to_string(n)};
    if (aggregate)
        args.emplace_back("--aggregate");
    if (c.polling)
        args.emplace_back("--polling");
    if (c.lane)
        args.emplace_back("--lane");
    auto hub = detail::Child::spawn({.argv = std::move(args), .capture = true});
    std::istringstream out(hub.read_rest(Deadline::after(600s)));
    std::vector<double> v(count);
    for (auto& x : v)
        out >> x;
    if (hub.finish(Deadline::after(10s)) != 0 || !out)
        throw std::runtime_error(fmt::format("the {} hub with {} peers failed", impl, n));
    return v;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int aggregate(const std::string& self, const Config& c, const std::string& kind,
              const std::vector<int>& counts, int repeats)
{
    std::printf("%s%s (%s): N clients into one server, 64 KiB writes and 8 B messages, 16 in "
                "flight per client, then 64 B reads one at a time; medians of %d runs, weft (a "
                "Node) and raw libfabric alternating\n",
                c.provider.c_str(), c.lane ? " (weft: the same-host lane)" : "", kind.c_str(),
                repeats);
    std::printf("%8s %12s %12s %7s %14s %14s %7s %14s %14s %7s\n", "clients", "weft MB/s", "raw MB/s",
                "ratio", "weft msg/s", "raw msg/s", "ratio", "weft reads/s", "raw reads/s", "ratio");
    for (const int n : counts) {
        std::map<std::string, std::vector<double>> mb, msgs, reads;
        for (int rep = 0; rep < repeats; ++rep)
            for (const char* impl : {"weft", "raw"}) {
                const auto v = hub_numbers(self, impl, c, kind, n, true, 3);
                mb[impl].push_back(v[0]);
                msgs[impl].push_back(v[1]);
                reads[impl].push_back(v[2]);
            }
        const double wm = median(mb["weft"]), rm = median(mb["raw"]);
        const double wn = median(msgs["weft"]), rn = median(msgs["raw"]);
        const double wr = median(reads["weft"]), rr = median(reads["raw"]);
        std::printf("%8d %12.0f %12.0f %7.2f %14.0f %14.0f %7.2f %14.0f %14.0f %7.2f\n", n, wm, rm,
                    rm > 0 ? wm / rm : 0, wn, rn, rn > 0 ? wn / rn : 0, wr, rr, rr > 0 ? wr / rr : 0);
    }
    return 0;
}

} // namespace

} // namespace weft::peers

int main(int argc, char** argv)
{
    using namespace weft::peers;
    CLI::App app{"what a peer costs a process that reaches many: weft's Node beside raw libfabric"};
    Config c;
    c.provider = "tcp;ofi_rxm";
    std::string kind = "rdm";
    std::vector<int> counts{1, 8, 32, 128};
    int repeats = 3;
    std::string peer_impl;
    std::string hub_impl;
    std::uint32_t index = 0;
    app.add_option("-p,--provider", c.provider, "provider, as fi_getinfo names it");
    app.add_option("-k,--kind", kind, "msg or rdm")->check(CLI::IsMember({"msg", "rdm"}));
    app.add_option("-n,--peers", counts, "peer counts")->delimiter(',');
    app.add_option("-r,--repeats", repeats, "runs of each (weft and raw alternate)");
    app.add_option("--peer", peer_impl)->group(""); // internal: a peer process
    app.add_option("--hub", hub_impl)->group("");   // internal: a hub process
    app.add_option("--index", index)->group("");
    app.add_flag("--aggregate", c.aggregate,
                 "instead: aggregate write bandwidth (64 KiB), 8 B message rate and 64 B read rate "
                 "(one at a time) of N clients into one hub, weft and raw libfabric");
    app.add_flag("--polling", c.polling,
                 "weft's Nodes without a progress thread (Progress::polling): every process "
                 "here polls its own");
    app.add_flag("--lane", c.lane,
                 "weft's Nodes on the same-host lane (Options::same_host); raw libfabric stays "
                 "on the provider");
    CLI11_PARSE(app, argc, argv);
    c.kind = kind == "msg" ? weft::EndpointKind::msg : weft::EndpointKind::rdm;
    try {
        if (!peer_impl.empty()) {
            Channel hub(3);
            return peer_impl == "weft" ? weft_child(c, hub, index) : raw_child(c, hub, index);
        }
        if (!hub_impl.empty()) {
            const Result r = run_hub(hub_impl, c, counts.at(0));
            if (c.aggregate)
                std::printf("%.1f %.0f %.0f\n", r.write_mb_s, r.messages_s, r.reads_s);
            else
                std::printf("%.3f %zu %zu %zu %zu %zu %zu\n", r.ms, r.start.rss_kib,
                            r.after.rss_kib, r.start.fds, r.after.fds, r.before.threads,
                            r.after.threads);
            return 0;
        }
        const std::string self = std::filesystem::read_symlink("/proc/self/exe");
        if (c.aggregate)
            return aggregate(self, c, kind, counts, repeats);
        std::printf("%s (%s): the hub process after reaching every peer (growth from its "
                    "start), and the cost of each added peer (the slope from the previous count); "
                    "medians of %d runs, weft and raw alternating\n",
                    c.provider.c_str(), kind.c_str(), repeats);
        std::printf("%6s %-5s %9s %10s %10s %6s %8s %8s\n", "peers", "impl", "time ms", "hub KiB",
                    "KiB/peer", "fds", "fds/peer", "threads");
        std::map<std::string, std::vector<double>> previous; // {n, KiB, fds}
        for (const int n : counts) {
            std::map<std::string, std::vector<std::vector<double>>> runs;
            for (int rep = 0; rep < repeats; ++rep)
                for (const char* impl : {"weft", "raw"}) {
                    const auto v = hub_numbers(self, impl, c, kind, n, false, 7);
                    runs[impl].push_back({v[0], v[2] - v[1], v[4] - v[3], v[6]});
                }
            std::map<std::string, double> per_peer;
            for (const char* impl : {"weft", "raw"}) {
                auto col = [&](std::size_t k) {
                    std::vector<double> xs;
                    for (auto& r : runs[impl])
                        xs.push_back(r[k]);
                    return median(xs);
                };
                const auto& prev = previous[impl];
                const double dn = prev.empty() ? n : n - prev[0];
                const double kib = (col(1) - (prev.empty() ? 0 : prev[1])) / dn;
                const double fds = (col(2) - (prev.empty() ? 0 : prev[2])) / dn;
                per_peer[impl] = kib;
                std::printf("%6d %-5s %9.1f %10.0f %10.1f %6.0f %8.2f %8.0f\n", n, impl, col(0),
                            col(1), kib, col(2), fds, col(3));
                previous[impl] = {static_cast<double>(n), col(1), col(2)};
            }
            std::printf("%6d %-5s %9s %10s %10.2f\n", n, "ratio", "", "",
                        per_peer["raw"] != 0 ? per_peer["weft"] / per_peer["raw"] : 0.0);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-peers-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
