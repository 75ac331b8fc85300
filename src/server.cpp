// SPDX-License-Identifier: MIT
// The server's side of the bootstrap (connection.cpp has the client's), for
// many clients at once. One poll loop, run by whichever thread is in accept(),
// moves every pending client a step when its socket or its fabric endpoint has
// something: hello -> (challenge -> proof) -> offer -> fabric connection (MSG:
// the FI_CONNREQ carrying the client's token, routed here from the shared
// listener; RDM: the client's address in its `ready`) -> `ready`. Nothing in
// the loop blocks on one client, so a silent or garbage-speaking stranger
// costs the others nothing; each pending client has its own deadline.
#include "weft/connection.hpp"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "offer.hpp"
#include "side_wire.hpp"
#include "socket.hpp"
#include "weft/error.hpp"

namespace weft {
namespace {

using Token = std::array<std::byte, 16>;

Token make_token()
{
    Token t{};
    std::size_t got = 0;
    while (got < t.size()) {
        const ssize_t n = getrandom(t.data() + got, t.size() - got, 0);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else if (errno != EINTR)
            detail::throw_error("getrandom", -errno, "");
    }
    return t;
}

bool is_wildcard(std::string_view host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

/// Most clients in their bootstrap at once; more wait in the listen backlog.
constexpr std::size_t max_pending = 512;
/// How many rejection reasons Server::rejections() keeps.
constexpr std::size_t kept_reasons = 16;

/// One client between its TCP connect and a connected endpoint.
struct Pending {
    enum class Step : std::uint8_t { hello, proof, fabric, done };

    int fd = -1;
    std::string peer;
    Deadline deadline;
    Step step = Step::hello;
    detail::side::Nonce challenge{};
    bool authenticated = false;
    Token token{};
    std::shared_ptr<Endpoint> ep; // MSG: accepting; RDM: the server's endpoint
    Peer address;                 // RDM: the client in the endpoint's address vector
    bool fabric_up = false;       // MSG: connected and greeted; RDM: address inserted
    bool ready_in = false;        // the client's `ready` arrived
    std::vector<std::byte> in;    // received, not yet a whole frame
    std::vector<std::byte> out;   // to send
    std::size_t out_sent = 0;

    Pending(int fd_, std::string peer_, Deadline deadline_)
        : fd(fd_), peer(std::move(peer_)), deadline(deadline_)
    {
    }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    ~Pending()
    {
        if (fd >= 0)
            ::close(fd);
    }

    void queue(Frame type, std::span<const std::byte> payload)
    {
        const auto h = detail::side::encode_header(type, payload.size());
        out.insert(out.end(), h.begin(), h.end());
        out.insert(out.end(), payload.begin(), payload.end());
    }
    const char* waiting_for() const
    {
        switch (step) {
        case Step::hello: return "its hello";
        case Step::proof: return "its shared-secret proof";
        case Step::fabric:
            return !fabric_up ? (ep ? "its fabric connection to complete"
                                    : "its fabric connection request (or its address)")
                              : "its ready";
        case Step::done: return "the last frame to be sent";
        }
        return "?";
    }
};

} // namespace

struct Server::State {
    std::shared_ptr<const Selection> selection;
    SideListener side;
    std::string secret;
    std::shared_ptr<Fabric> fabric;
    std::shared_ptr<Domain> domain;
    std::shared_ptr<Listener> listener; // MSG
    std::shared_ptr<Endpoint> rdm;      // RDM
    bool rdm_handed_out = false;        // RDM: `rdm` serves a connection already

    mutable std::mutex mutex; // everything below, and the calls that use the above
    std::list<Pending> pending;
    std::deque<Connection> ready;
    Rejections rejected;

    State(const Options& options, SideListener listener_);
    bool msg() const { return selection->kind() == EndpointKind::msg; }
    void step(Clock::duration wait);
    void take_new_clients();
    void read_from(Pending& p);
    void on_frame(Pending& p, const detail::side::FrameHead& head,
                  std::span<const std::byte> payload);
    void send_offer(Pending& p);
    void route_requests();
    void advance_fabric(Pending& p);
    bool flush(Pending& p);
    void finish(std::list<Pending>::iterator it);
    void reject(std::list<Pending>::iterator it, const std::string& why);
    std::string rejection_summary() const;
};

Server::State::State(const Options& options, SideListener listener_)
    : side(std::move(listener_)), secret(resolve_secret(options.secret))
{
    Options opts = options;
    if (opts.node.empty() && !is_wildcard(side.host()))
        opts.node = side.host(); // the fabric listens where the side channel does
    selection = std::make_shared<const Selection>(select(opts));
    fabric = Fabric::open(selection->info());
    domain = Domain::open(fabric, selection->info());
    if (msg())
        listener = Listener::open(fabric, selection->info());
    else
        rdm = Endpoint::open_rdm(domain, selection->options());
}

void Server::State::take_new_clients()
{
    const auto timeout = selection->options().handshake_timeout;
    while (pending.size() < max_pending) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        const int fd = ::accept4(side.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                                 SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; // EAGAIN: none left; anything else: try again next step
        detail::set_nodelay(fd);
        const auto* sa = reinterpret_cast<sockaddr*>(&ss);
        auto& p = pending.emplace_back(
            fd, fmt::format("{}:{}", detail::address_text(sa), detail::port_of(sa)),
            Deadline::after(timeout));
        p.queue(Frame::hello, detail::side::hello_payload(!secret.empty()));
    }
}

void Server::State::read_from(Pending& p)
{
    std::array<std::byte, 4096> buf;
    for (;;) {
        const ssize_t n = ::recv(p.fd, buf.data(), buf.size(), 0);
        if (n > 0) {
            p.in.insert(p.in.end(), buf.begin(), buf.begin() + n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        detail::side_fail(-FI_ECONNRESET,
                          fmt::format("{} closed the side channel while the server waited for {}",
                                      p.peer, p.waiting_for()));
    }
    using detail::side::header_size;
    while (p.in.size() >= header_size) {
        const auto head = detail::side::decode_header(
            std::span<const std::byte, header_size>(p.in.data(), header_size), p.peer);
        if (p.in.size() < header_size + head.size)
            break;
        const std::vector<std::byte> payload(p.in.begin() + header_size,
                                             p.in.begin() + static_cast<std::ptrdiff_t>(header_size + head.size));
        p.in.erase(p.in.begin(), p.in.begin() + static_cast<std::ptrdiff_t>(header_size + head.size));
        on_frame(p, head, payload);
    }
}

void Server::State::on_frame(Pending& p, const detail::side::FrameHead& head,
                             std::span<const std::byte> payload)
{
    namespace side = detail::side;
    switch (p.step) {
    case Pending::Step::hello:
        side::check_frame(head, Frame::hello, payload, p.peer);
        side::check_hello(payload, !secret.empty(), p.peer);
        if (secret.empty()) {
            send_offer(p);
            return;
        }
        p.challenge = side::random_nonce();
        p.queue(Frame::challenge, p.challenge);
        p.step = Pending::Step::proof;
        return;
    case Pending::Step::proof: {
        side::check_frame(head, Frame::proof, payload, p.peer);
        side::Mac proof{};
        try {
            proof = side::acceptor_proof(secret, p.challenge, payload, p.peer);
        } catch (const Error&) {
            p.queue(Frame::error, std::as_bytes(std::span(side::secret_mismatch)));
            (void)flush(p);
            throw;
        }
        p.queue(Frame::proof, proof);
        p.authenticated = true;
        send_offer(p);
        return;
    }
    case Pending::Step::fabric:
        side::check_frame(head, Frame::ready, payload, p.peer);
        if (p.ready_in)
            detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent its ready twice", p.peer));
        p.ready_in = true;
        if (!msg()) { // the client's address
            p.address = p.ep->insert_peer(payload);
            p.fabric_up = true;
        }
        return;
    case Pending::Step::done:
        detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent frame type {} before the "
                                               "server's ready",
                                               p.peer, head.type));
    }
}

void Server::State::send_offer(Pending& p)
{
    p.token = make_token();
    if (!msg()) {
        // A peer that dies can wedge a shared RDM endpoint on some providers
        // (shm: its commands stay at the head of the queue, measured): there,
        // each connection gets an endpoint of its own.
        if (rdm_handed_out && domain->quirks().dead_peer_blocks_endpoint)
            rdm = Endpoint::open_rdm(domain, selection->options());
        rdm_handed_out = true;
        p.ep = rdm;
    }
    const Offer offer{selection->kind(),
                      selection->info()->addr_format,
                      std::string(selection->provider()),
                      std::string(selection->info().fabric_name()),
                      {p.token.begin(), p.token.end()},
                      msg() ? listener->name() : rdm->name(),
                      selection->report()};
    p.queue(Frame::offer, encode(offer));
    p.step = Pending::Step::fabric;
}

void Server::State::route_requests()
{
    // Every MSG client's FI_CONNREQ arrives on the one listener: the token
    // in its connection data names the pending client it belongs to.
    while (auto ev = listener->poll_request()) {
        const auto owner = std::find_if(pending.begin(), pending.end(), [&](const Pending& p) {
            return p.step == Pending::Step::fabric && !p.ep && ev->data.size() >= p.token.size() &&
                   std::equal(p.token.begin(), p.token.end(), ev->data.begin());
        });
        if (owner == pending.end()) {
            listener->reject(*ev); // a stale or forged token
            continue;
        }
        try {
            owner->ep = Endpoint::begin_accept(domain, std::move(*ev), selection->options());
        } catch (const std::exception& e) {
            reject(owner, e.what());
        }
    }
}

void Server::State::advance_fabric(Pending& p)
{
    if (msg() && p.ep && !p.fabric_up)
        p.fabric_up = p.ep->accept_step();
    if (p.fabric_up && p.ready_in && p.step == Pending::Step::fabric) {
        p.queue(Frame::ready, {});
        p.step = Pending::Step::done;
    }
}

bool Server::State::flush(Pending& p)
{
    while (p.out_sent < p.out.size()) {
        const ssize_t n =
            ::send(p.fd, p.out.data() + p.out_sent, p.out.size() - p.out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            p.out_sent += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return false;
        detail::side_fail(-FI_ECONNRESET,
                          fmt::format("{} closed the side channel while the server sent to it ({})",
                                      p.peer, std::strerror(errno)));
    }
    p.out.clear();
    p.out_sent = 0;
    return true;
}

void Server::State::finish(std::list<Pending>::iterator it)
{
    Pending& p = *it;
    SideChannel channel(std::exchange(p.fd, -1), std::move(p.peer), p.authenticated);
    ready.emplace_back(selection, domain, std::move(p.ep), p.address, std::move(channel));
    pending.erase(it);
}

void Server::State::reject(std::list<Pending>::iterator it, const std::string& why)
{
    Pending& p = *it;
    // Best effort, never blocking: tell a weft client why (a stranger gets
    // the same text, which reveals nothing it did not send).
    if (p.step != Pending::Step::hello || !p.in.empty()) {
        p.out.erase(p.out.begin(), p.out.begin() + static_cast<std::ptrdiff_t>(p.out_sent));
        p.out_sent = 0;
        p.queue(Frame::error, std::as_bytes(std::span(why.data(), why.size())));
        try {
            (void)flush(p);
        } catch (const std::exception&) {
        }
    }
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
        fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
        fabric_wait |= p.step == Pending::Step::fabric && (msg() || p.ep) && !p.fabric_up;
        next_deadline = std::min(next_deadline, p.deadline.when());
    }
    // The fabric side (connection requests, FI_CONNECTED, the hello) has no
    // descriptor here: look at it every millisecond while a client is there.
    if (fabric_wait)
        next_deadline = std::min(next_deadline, Clock::now() + std::chrono::milliseconds(1));
    const int timeout = Deadline(next_deadline).remaining_ms();
    (void)::poll(fds.data(), fds.size(), timeout);

    if (fds[0].revents & POLLIN)
        take_new_clients();
    if (msg())
        route_requests();
    std::size_t i = 1;
    for (auto it = pending.begin(); it != pending.end(); ++i) {
        auto current = it++;
        Pending& p = *current;
        // Clients taken in this step have no entry in fds yet.
        const short revents = i < fds.size() && fds[i].fd == p.fd ? fds[i].revents : 0;
        try {
            if (revents & (POLLIN | POLLHUP | POLLERR))
                read_from(p);
            if (p.step == Pending::Step::fabric)
                advance_fabric(p);
            if (!p.out.empty() && !flush(p))
                continue;
            if (p.step == Pending::Step::done) {
                if (!p.in.empty()) // the client waits for our ready before it sends more
                    detail::side_fail(-EPROTO, fmt::format("protocol error: {} sent {} B before "
                                                           "the server's ready",
                                                           p.peer, p.in.size()));
                finish(current);
                continue;
            }
            if (p.deadline.expired())
                detail::side_fail(-FI_ETIMEDOUT,
                                  fmt::format("{} did not complete the bootstrap within {} ms "
                                              "(Options::handshake_timeout); the server waited "
                                              "for {}",
                                              p.peer, selection->options().handshake_timeout.count(),
                                              p.waiting_for()));
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
            if (!s.ready.empty()) {
                Connection c = std::move(s.ready.front());
                s.ready.pop_front();
                return c;
            }
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

Server::Rejections Server::rejections() const
{
    const State& s = state("Server::rejections");
    const std::lock_guard lock(s.mutex);
    return s.rejected;
}

} // namespace weft
