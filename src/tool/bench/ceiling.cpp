// SPDX-License-Identifier: MIT
// Ceilings no program over libfabric can pass here, measured without it:
// - shm's large transfers: process_vm_writev (cross-memory attach) from this
//   process into another one, as shm does for big RMA writes
//   (`weft-raw-bench --cma-ceiling SIZE`, bench/compare.py);
// - tcp's requests and answers: N client processes and one server over
//   loopback TCP sockets, nothing else (`weft-raw-bench --tcp-echo-ceiling N`,
//   bench/kv_vs_redis.py).
#include <netinet/in.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "child.hpp"
#include "harness.hpp"

namespace weft::bench {

int cma_ceiling(std::size_t size, std::chrono::milliseconds budget)
{
    auto sink_process = detail::Child::fork([size](int to_parent) {
        void* sink = std::aligned_alloc(4096, size);
        std::memset(sink, 0, size);
        const auto addr = reinterpret_cast<std::uintptr_t>(sink);
        (void)!write(to_parent, &addr, sizeof addr);
        pause();
        return 0;
    });
    std::uintptr_t addr = 0;
    if (!sink_process.read_exact(&addr, sizeof addr, Deadline::after(std::chrono::seconds(10))))
        throw std::runtime_error("the process to write into did not start");
    const std::unique_ptr<void, decltype(&std::free)> src(std::aligned_alloc(4096, size), &std::free);
    std::memset(src.get(), 1, size);
    iovec local{src.get(), size};
    iovec remote{reinterpret_cast<void*>(addr), size};
    const pid_t pid = sink_process.pid();
    for (int i = 0; i < 10; ++i)
        (void)process_vm_writev(pid, &local, 1, &remote, 1, 0);
    std::uint64_t n = 0;
    const auto start = Clock::now();
    for (const auto until = start + budget; Clock::now() < until; ++n)
        if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(size))
            throw std::runtime_error(std::string("process_vm_writev: ") + std::strerror(errno));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("{\"tool\": \"cma\", \"bytes\": %zu, \"iterations\": %llu, \"mb_per_s\": %.1f}\n",
                size, static_cast<unsigned long long>(n), static_cast<double>(n * size) / s / 1e6);
    return 0;
}

namespace {

[[noreturn]] void fail(const char* what)
{
    throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

/// Sends all of [p, p + n) (a blocking socket).
void send_all(int fd, const char* p, std::size_t n)
{
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno != EINTR)
            fail("send");
        if (w > 0) {
            p += w;
            n -= static_cast<std::size_t>(w);
        }
    }
}

/// Receives all n bytes at p: sleeping in recv, or (`spin`) polling it.
bool receive_all(int fd, char* p, std::size_t n, bool spin)
{
    while (n > 0) {
        const ssize_t r = ::recv(fd, p, n, spin ? MSG_DONTWAIT : MSG_WAITALL);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (r > 0) {
            p += r;
            n -= static_cast<std::size_t>(r);
        }
    }
    return true;
}

/// One client: connects, waits for the server's go, then sends `depth` requests of
/// 64 B at once and waits for their answers until `budget` is over; writes how many
/// it had answered, and in how long, to its parent.
int echo_client(int to_parent, const sockaddr_in& at, std::size_t size, std::size_t depth,
                std::chrono::milliseconds budget, bool spin)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0)
        return 1;
    std::vector<char> requests(64 * depth, 'q'), answers(size * depth);
    char go = 0;
    if (::recv(fd, &go, 1, MSG_WAITALL) != 1)
        return 1;
    std::uint64_t n = 0;
    const auto start = Clock::now();
    for (const auto until = start + budget; Clock::now() < until; n += depth) {
        send_all(fd, requests.data(), requests.size());
        if (!receive_all(fd, answers.data(), answers.size(), spin))
            return 1;
    }
    const double result[2] = {static_cast<double>(n), std::chrono::duration<double>(Clock::now() - start).count()};
    ::close(fd);
    return ::write(to_parent, result, sizeof result) == sizeof result ? 0 : 1;
}

/// One run: the answers a second of all clients together.
double echo_run(int clients, std::size_t size, std::size_t depth, std::chrono::milliseconds budget,
                bool spin)
{
    const detail::Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    if (listener.get() < 0 || ::bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
        ::listen(listener.get(), clients) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&at), &len) != 0)
        fail("a loopback listening socket");
    std::vector<detail::Child> kids;
    for (int i = 0; i < clients; ++i)
        kids.push_back(detail::Child::fork(
            [&](int to_parent) { return echo_client(to_parent, at, size, depth, budget, spin); }));

    // The server: every connection in one epoll set, polled without sleeping; each
    // readable one read once, and every whole request in it answered.
    const detail::Fd ep(::epoll_create1(0));
    std::vector<detail::Fd> conns;
    std::vector<std::size_t> partial(static_cast<std::size_t>(clients)); // bytes of a request read
    const int one = 1;
    const Deadline connected = Deadline::after(std::chrono::seconds(30));
    for (int i = 0; i < clients; ++i) {
        pollfd waiting{listener.get(), POLLIN, 0};
        while (::poll(&waiting, 1, 100) == 0) // a client that failed before connecting
            if (connected.expired())
                throw std::runtime_error("--tcp-echo-ceiling: " + std::to_string(clients - i) + " of " +
                                         std::to_string(clients) + " clients did not connect in 30 s");
        detail::Fd c(::accept(listener.get(), nullptr, nullptr));
        if (c.get() < 0)
            fail("accept");
        ::setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.u32 = static_cast<std::uint32_t>(i);
        if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, c.get(), &e) != 0)
            fail("epoll_ctl");
        conns.push_back(std::move(c));
    }
    for (const detail::Fd& c : conns)
        send_all(c.get(), "g", 1);
    std::vector<char> in(64 * 256 * 16), out(size * depth, 'a');
    std::array<epoll_event, 64> ready;
    int open = clients;
    for (const Deadline until = Deadline::after(budget + std::chrono::seconds(30)); open > 0;) {
        if (until.expired())
            throw std::runtime_error("--tcp-echo-ceiling: the clients did not finish in time");
        const int k = ::epoll_wait(ep.get(), ready.data(), static_cast<int>(ready.size()), 0);
        for (int j = 0; j < k; ++j) {
            const std::uint32_t i = ready[static_cast<std::size_t>(j)].data.u32;
            const ssize_t r = ::recv(conns[i].get(), in.data(), in.size(), MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                ::epoll_ctl(ep.get(), EPOLL_CTL_DEL, conns[i].get(), nullptr);
                --open;
                continue;
            }
            if (r < 0)
                continue;
            const std::size_t bytes = partial[i] + static_cast<std::size_t>(r);
            partial[i] = bytes % 64;
            for (std::size_t answers = bytes / 64; answers > 0;) {
                const std::size_t m = std::min(answers, depth);
                send_all(conns[i].get(), out.data(), m * size);
                answers -= m;
            }
        }
    }
    double ops = 0, slowest = 0;
    for (auto& kid : kids) {
        double result[2];
        if (!kid.read_exact(result, sizeof result, Deadline::after(std::chrono::seconds(10))))
            throw std::runtime_error("--tcp-echo-ceiling: a client process failed");
        ops += result[0];
        slowest = std::max(slowest, result[1]);
    }
    return ops / slowest;
}

} // namespace

int tcp_echo_ceiling(int clients, std::size_t size, std::size_t depth, std::chrono::milliseconds budget)
{
    if (clients < 1 || clients > 256 || size < 1 || size > (1u << 20) || depth < 1 || depth > 256 ||
        size * depth > (16u << 20))
        throw std::invalid_argument("--tcp-echo-ceiling: 1 to 256 clients, answers of 1 B to 1 MiB, "
                                    "a queue depth of 1 to 256, at most 16 MiB of answers in flight");
    // Clients that sleep in recv win where they outnumber the cores (a spinning one
    // holds a core the server needs); clients that poll win where they do not.
    const double sleeping = echo_run(clients, size, depth, budget, false);
    const double polling = echo_run(clients, size, depth, budget, true);
    std::printf("{\"tool\": \"tcp-echo\", \"clients\": %d, \"bytes\": %zu, \"depth\": %zu, "
                "\"sleeping_ops_per_s\": %.0f, \"polling_ops_per_s\": %.0f, \"ops_per_s\": %.0f}\n",
                clients, size, depth, sleeping, polling, std::max(sleeping, polling));
    return 0;
}

} // namespace weft::bench
