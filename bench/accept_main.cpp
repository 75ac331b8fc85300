// SPDX-License-Identifier: MIT
// weft-accept-bench: how fast one Server takes many clients that start at once.
//
//   weft-accept-bench [-p PROVIDER] [-n CLIENTS] [--strangers N]
//
// Forks CLIENTS client processes before any libfabric call here. Each starts
// libfabric (a selection for the provider) and then waits on a pipe; when all
// are ready, the server releases them together and accepts. Prints the time
// from the release to each accept, and accepts per second over the whole
// batch. With --strangers, that many idle TCP connections sit on the port
// first. A program, not a test: it prints numbers and asserts nothing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "child.hpp"
#include "weft/weft.hpp"

using namespace weft;
using namespace std::chrono_literals;

namespace {

int client(const Options& o, int ready_fd, int go_fd, std::uint16_t port)
{
    try {
        (void)select(o); // libfabric up, its providers initialised
        const char ready = 'r';
        if (::write(ready_fd, &ready, 1) != 1)
            return 1;
        char go = 0;
        if (::read(go_fd, &go, 1) != 1)
            return 1;
        Options mine = o;
        mine.provider.clear(); // the server decides
        Connection c = Connection::connect(fmt::format("127.0.0.1:{}", port), mine,
                                           Deadline::after(60s));
        c.barrier(Deadline::after(60s)); // stay until the server has taken everyone
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "client: %s\n", e.what());
        return 1;
    }
}

} // namespace

int main(int argc, char** argv)
{
    CLI::App app{"accept rate of one weft Server with many clients starting at once"};
    std::string provider = "tcp";
    int clients = 32;
    int strangers = 0;
    app.add_option("-p,--provider", provider, "provider (as WEFT_PROVIDER takes it)");
    app.add_option("-n,--clients", clients, "client processes")->check(CLI::Range(1, 512));
    app.add_option("--strangers", strangers, "idle TCP connections on the port first")
        ->check(CLI::Range(0, 1000));
    CLI11_PARSE(app, argc, argv);

    // The port is fixed before the fork: the children need it.
    std::uint16_t port = 0;
    {
        SideListener probe("127.0.0.1", 0);
        port = probe.port();
    }
    int ready[2];
    int go[2];
    if (::pipe(ready) != 0 || ::pipe(go) != 0)
        return 1;
    Options o;
    o.provider = provider;
    o.allow_shm = true;
    o.node = "127.0.0.1";
    std::vector<detail::Child> children;
    for (int i = 0; i < clients; ++i)
        children.push_back(detail::Child::fork([&](int) { return client(o, ready[1], go[0], port); }));
    int status = 0;
    try {
        Server server(o, "127.0.0.1", port);
        std::vector<int> idle;
        for (int i = 0; i < strangers; ++i) {
            const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons(port);
            if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
                idle.push_back(fd);
        }
        for (int i = 0; i < clients; ++i) {
            char r = 0;
            if (::read(ready[0], &r, 1) != 1)
                throw std::runtime_error("a client died before it was ready");
        }
        const auto start = Clock::now();
        const std::vector<char> release(static_cast<std::size_t>(clients), 'g');
        if (::write(go[1], release.data(), release.size()) != static_cast<ssize_t>(release.size()))
            throw std::runtime_error("could not release the clients");
        std::vector<Connection> accepted;
        std::vector<double> at_ms;
        for (int i = 0; i < clients; ++i) {
            accepted.push_back(server.accept(Deadline::after(60s)));
            at_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
        for (auto& c : accepted)
            c.barrier(Deadline::after(60s));
        const double last = at_ms.back();
        std::printf("provider %s (%s), %d clients started beforehand, %d idle strangers\n",
                    std::string(server.selection().provider()).c_str(),
                    std::string(to_string(server.selection().kind())).c_str(), clients, strangers);
        std::printf("accepted: first %.1f ms, median %.1f ms, last %.1f ms after the release\n",
                    at_ms.front(), at_ms[at_ms.size() / 2], last);
        std::printf("accepts/s: %.0f\n", clients / (last / 1000.0));
        for (int fd : idle)
            ::close(fd);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-accept-bench: %s\n", e.what());
        status = 1;
    }
    for (auto& child : children)
        if (child.finish(Deadline::after(60s)) != 0)
            status = 1;
    return status;
}
