// SPDX-License-Identifier: MIT
// A Server's poll loop: one step moves every pending client on (server.cpp
// has what each step does), and the calls of the Server itself.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "server_state.hpp"
#include "socket.hpp"
#include "weft/base/error.hpp"

namespace weft {

using detail::server::kept_reasons;
using detail::server::Pending;

void Server::State::finish(std::list<Pending>::iterator it)
{
    Pending& p = *it;
    SideChannel channel(p.stream.release(), p.peer(), p.hello.authenticated());
    ready.emplace_back(std::move(p.node), p.id, std::move(channel));
    pending.erase(it);
}

void Server::State::reject(std::list<Pending>::iterator it, const std::string& why)
{
    Pending& p = *it;
    // Best effort, never blocking: tell a weft client why (a stranger gets
    // the same text, which reveals nothing it did not send).
    if (p.step != Pending::Step::hello || p.hello.heard() || p.stream.unread() != 0) {
        p.stream.queue(detail::Frame::error, std::as_bytes(std::span(why.data(), why.size())));
        try {
            (void)p.stream.flush();
        } catch (const std::exception&) {
        }
    }
    if (p.node && p.id)
        p.node->retire_peer(p.id);
    ++rejected.count;
    if (rejected.recent.size() == kept_reasons)
        rejected.recent.erase(rejected.recent.begin());
    rejected.recent.push_back(why);
    pending.erase(it);
}

void Server::State::step(Clock::duration wait)
{
    std::vector<pollfd> fds;
    fds.reserve(pending.size() + 1);
    fds.push_back({side.fd(), POLLIN, 0});
    bool fabric_wait = false;
    auto next_deadline = Clock::now() + wait;
    for (const Pending& p : pending) {
        fds.push_back({p.stream.fd(), static_cast<short>(POLLIN | (p.stream.sending() ? POLLOUT : 0)),
                       0});
        fabric_wait |= p.step == Pending::Step::fabric && (msg() || p.ready_in);
        next_deadline = std::min(next_deadline, p.deadline.when());
    }
    // The fabric side (connection requests, FI_CONNECTED, the hellos) has no
    // descriptor here: look at it every millisecond while a client is there.
    if (fabric_wait)
        next_deadline = std::min(next_deadline, Clock::now() + std::chrono::milliseconds(1));
    const int timeout = Deadline(next_deadline).remaining_ms();
    (void)::poll(fds.data(), fds.size(), timeout);

    if (fds[0].revents & POLLIN)
        take_new_clients();
    if (msg() && fabric_wait)
        progress_nodes();
    std::size_t i = 1;
    for (auto it = pending.begin(); it != pending.end(); ++i) {
        auto current = it++;
        Pending& p = *current;
        // Clients taken in this step have no entry in fds yet.
        const short revents = i < fds.size() && fds[i].fd == p.stream.fd() ? fds[i].revents : 0;
        try {
            if (revents & (POLLIN | POLLHUP | POLLERR))
                read_from(p);
            if (p.step == Pending::Step::fabric)
                advance_fabric(p);
            if (p.stream.sending() && !p.stream.flush())
                continue;
            if (p.step == Pending::Step::done) {
                if (p.stream.unread() != 0) // the client waits for our ready before it sends more
                    detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent {} B before "
                                                           "the server's ready",
                                                           p.peer(), p.stream.unread()));
                finish(current);
                continue;
            }
            if (p.deadline.expired())
                detail::side_fail(-FI_ETIMEDOUT,
                                  fmt::format("{} did not complete the bootstrap within {} ms "
                                              "(Options::handshake_timeout); the server waited "
                                              "for {}",
                                              p.peer(), selection->options().handshake_timeout.count(),
                                              p.waiting_for(msg())));
        } catch (const std::exception& e) {
            reject(current, e.what());
        }
    }
}

std::string Server::State::rejection_summary() const
{
    if (rejected.count == 0)
        return {};
    return fmt::format("; {} side-channel connection(s) were rejected meanwhile (last: {})",
                       rejected.count, rejected.recent.back());
}

// ---- Server ----

Server::Server(const Options& options, std::string_view host, std::uint16_t port)
    : Server(options, SideListener(host, port))
{
}

Server::Server(const Options& options, SideListener listener)
    : state_(std::make_unique<State>(options, std::move(listener)))
{
}

Server::~Server() = default;
Server::Server(Server&&) noexcept = default;
Server& Server::operator=(Server&&) noexcept = default;

Server::State& Server::state(const char* call) const
{
    if (!state_)
        throw UsageError(call, -FI_EINVAL, "",
                         "this Server was moved from: use the Server it was moved to");
    return *state_;
}

std::uint16_t Server::port() const { return state("Server::port").side.port(); }

const Selection& Server::selection() const { return *state("Server::selection").selection; }

Connection Server::accept(Deadline deadline)
{
    State& s = state("Server::accept");
    const bool expired_on_entry = deadline.expired();
    for (;;) {
        {
            const std::lock_guard lock(s.mutex);
            if (auto c = s.take_ready())
                return std::move(*c);
            if (deadline.expired())
                detail::side_fail(
                    -FI_ETIMEDOUT,
                    fmt::format("{}: no client completed its bootstrap with {}:{}{}",
                                expired_on_entry ? "the deadline had already passed when "
                                                   "Server::accept was called"
                                                 : "the deadline passed",
                                s.side.host(), s.side.port(), s.rejection_summary()));
            // Short slices, so that other accepting threads take turns.
            s.step(std::min<Clock::duration>(deadline.remaining(), std::chrono::milliseconds(20)));
        }
    }
}

std::optional<Connection> Server::try_accept()
{
    State& s = state("Server::try_accept");
    const std::lock_guard lock(s.mutex);
    if (s.ready.empty())
        s.step(Clock::duration::zero());
    return s.take_ready();
}

Server::Rejections Server::rejections() const
{
    const State& s = state("Server::rejections");
    const std::lock_guard lock(s.mutex);
    return s.rejected;
}

} // namespace weft
