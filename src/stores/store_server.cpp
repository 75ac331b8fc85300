// SPDX-License-Identifier: MIT
// StoreServer: one poll loop, on a thread of its own, for every member of a
// TCP store. A member is a side-channel Stream: hello (and the shared-secret
// check), then requests, each answered in order; a get of an absent key is
// parked until the key is set or its wait ends. Nothing in the loop blocks
// on one member, so a silent or garbage-speaking stranger costs the others
// nothing; a member that says hello too slowly is dropped.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <list>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "side_stream.hpp"
#include "side_wire.hpp"
#include "socket.hpp"
#include "store_count.hpp"
#include "store_wire.hpp"
#include "weft/stores/tcp_store.hpp"

namespace weft {

namespace store = detail::store;
using detail::side::Stream;

namespace {

/// How long a new connection may take to say hello.
constexpr auto hello_timeout = std::chrono::seconds(10);
/// Members at once; more wait in the listen backlog.
constexpr std::size_t max_members = 4096;

} // namespace

// Named, not anonymous: StoreServer::State (external linkage) holds them.
namespace detail::store_server {

struct Member {
    Stream stream;
    detail::side::AcceptorHello hello;
    bool through = false; // the hello passed: requests follow
    Deadline hello_by;

    Member(detail::Fd fd, std::string peer, std::string_view secret)
        : stream(std::move(fd), std::move(peer)), hello(secret), hello_by(Deadline::after(hello_timeout))
    {
        hello.start(stream);
    }
};

struct Parked {
    Member* member;
    std::uint32_t id;
    std::string key;
    Clock::time_point until;
};

} // namespace detail::store_server

using detail::store_server::Member;
using detail::store_server::Parked;

struct StoreServer::State {
    SideListener listener;
    std::string secret;
    detail::Fd wake; // an eventfd: the destructor stops the loop through it
    std::atomic<bool> stopping{false};
    std::atomic<std::size_t> through{0};
    std::atomic<std::size_t> key_count{0};
    std::list<Member> members;
    std::map<std::string, std::vector<std::byte>, std::less<>> kv;
    std::list<Parked> parked;
    std::map<std::string, const Member*, std::less<>> owner_of; // keys set_owned, by setter
    std::thread thread;

    State(std::string_view host, std::uint16_t port, std::string_view secret_)
        : listener(host, port), secret(resolve_secret(secret_))
    {
        wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (!wake)
            detail::side_fail_errno("eventfd", "the TCP store server");
    }

    void run();
    void step();
    void take_new();
    void serve(Member& m);
    void on_request(Member& m, const store::Request& r);
    void answer(Member& m, std::uint32_t id, store::Op op, store::Status status,
                std::span<const std::byte> value = {}, std::int64_t sum = 0);
    void answer_parked(const std::string& key, std::span<const std::byte> value);
    void drop(std::list<Member>::iterator it);
};

void StoreServer::State::run()
{
    while (!stopping.load(std::memory_order_relaxed))
        step();
}

void StoreServer::State::step()
{
    std::vector<pollfd> fds;
    fds.reserve(members.size() + 2);
    fds.push_back({wake.get(), POLLIN, 0});
    fds.push_back({listener.fd(), POLLIN, 0});
    auto next = Clock::time_point::max();
    for (const Member& m : members) {
        fds.push_back({m.stream.fd(), static_cast<short>(POLLIN | (m.stream.sending() ? POLLOUT : 0)),
                       0});
        if (!m.through)
            next = std::min(next, m.hello_by.when());
    }
    for (const Parked& p : parked)
        next = std::min(next, p.until);
    (void)::poll(fds.data(), fds.size(), Deadline(next).remaining_ms());
    if (fds[0].revents & POLLIN)
        return; // stopping
    if (fds[1].revents & POLLIN)
        take_new();

    // Parked gets whose wait ended: answer `absent`.
    const auto now = Clock::now();
    for (auto it = parked.begin(); it != parked.end();) {
        if (it->until > now) {
            ++it;
            continue;
        }
        answer(*it->member, it->id, store::Op::get, store::Status::absent);
        it = parked.erase(it);
    }

    std::size_t i = 2;
    for (auto it = members.begin(); it != members.end(); ++i) {
        auto current = it++;
        Member& m = *current;
        // Members taken in this step have no entry in fds yet.
        const short revents = i < fds.size() && fds[i].fd == m.stream.fd() ? fds[i].revents : 0;
        try {
            if (revents & (POLLIN | POLLHUP | POLLERR))
                serve(m);
            if (m.stream.sending())
                (void)m.stream.flush();
            if (!m.through && m.hello_by.expired())
                detail::side_fail(-FI_ETIMEDOUT, "no hello in time");
        } catch (const std::exception& e) {
            // Best effort, never blocking: tell a weft member why.
            if (m.through || m.hello.heard()) {
                const std::string_view why = e.what();
                m.stream.queue(detail::Frame::error, std::as_bytes(std::span(why.data(), why.size())));
                try {
                    (void)m.stream.flush();
                } catch (const std::exception&) {
                }
            }
            drop(current);
        }
    }
}

void StoreServer::State::take_new()
{
    while (members.size() < max_members) {
        auto c = detail::accept_waiting(listener.fd());
        if (!c)
            return;
        members.emplace_back(std::move(c->fd), std::move(c->peer), secret);
    }
}

void StoreServer::State::serve(Member& m)
{
    m.stream.receive(m.through ? "its next request" : m.hello.waiting_for());
    while (const auto frame = m.stream.next()) {
        if (!m.through) {
            if (m.hello.on_frame(m.stream, *frame)) {
                m.through = true;
                through.fetch_add(1, std::memory_order_relaxed);
            }
            continue;
        }
        detail::side::check_frame(frame->head, detail::Frame::store, frame->payload, m.stream.peer());
        on_request(m, store::decode_request(frame->payload));
    }
}

void StoreServer::State::on_request(Member& m, const store::Request& r)
{
    switch (r.op) {
    case store::Op::set:
    case store::Op::set_owned:
        kv.insert_or_assign(r.key, r.value);
        key_count.store(kv.size(), std::memory_order_relaxed);
        if (r.op == store::Op::set_owned)
            owner_of.insert_or_assign(r.key, &m);
        else
            owner_of.erase(r.key);
        answer(m, r.id, r.op, store::Status::ok);
        answer_parked(r.key, r.value);
        return;
    case store::Op::get:
        if (const auto it = kv.find(r.key); it != kv.end())
            answer(m, r.id, r.op, store::Status::ok, it->second);
        else if (r.wait_ms == 0)
            answer(m, r.id, r.op, store::Status::absent);
        else
            parked.push_back({&m, r.id, r.key, Clock::now() + std::chrono::milliseconds(r.wait_ms)});
        return;
    case store::Op::add: {
        auto& v = kv[r.key];
        const auto was = detail::parse_count(v);
        if (!was) {
            answer(m, r.id, r.op, store::Status::not_a_number);
            return;
        }
        const std::int64_t sum = *was + r.delta;
        v = detail::count_text(sum);
        key_count.store(kv.size(), std::memory_order_relaxed);
        answer(m, r.id, r.op, store::Status::ok, {}, sum);
        answer_parked(r.key, v);
        return;
    }
    case store::Op::contains:
        answer(m, r.id, r.op, kv.contains(r.key) ? store::Status::ok : store::Status::absent);
        return;
    case store::Op::contains_each: {
        std::vector<std::byte> each;
        each.reserve(r.keys.size());
        for (const std::string& k : r.keys)
            each.push_back(std::byte{kv.contains(k) ? std::uint8_t{1} : std::uint8_t{0}});
        answer(m, r.id, r.op, store::Status::ok, each);
        return;
    }
    case store::Op::get_each: {
        wire::Writer each;
        std::size_t sent = 0;
        for (const std::string& k : r.keys) {
            const auto it = kv.find(k);
            if (it == kv.end()) {
                each.u8(static_cast<std::uint8_t>(store::Each::absent));
            } else if (sent + it->second.size() > store::get_each_budget) {
                each.u8(static_cast<std::uint8_t>(store::Each::ask_again));
            } else {
                each.u8(static_cast<std::uint8_t>(store::Each::value));
                each.bytes(it->second);
                sent += it->second.size();
            }
        }
        answer(m, r.id, r.op, store::Status::ok, each.data());
        return;
    }
    case store::Op::erase:
        owner_of.erase(r.key);
        answer(m, r.id, r.op, kv.erase(r.key) ? store::Status::ok : store::Status::absent);
        key_count.store(kv.size(), std::memory_order_relaxed);
        return;
    }
}

void StoreServer::State::answer(Member& m, std::uint32_t id, store::Op op, store::Status status,
                                std::span<const std::byte> value, std::int64_t sum)
{
    store::Answer a;
    a.id = id;
    a.status = status;
    a.value.assign(value.begin(), value.end());
    a.sum = sum;
    m.stream.queue(detail::Frame::store_answer, store::encode(a, op));
}

void StoreServer::State::answer_parked(const std::string& key, std::span<const std::byte> value)
{
    for (auto it = parked.begin(); it != parked.end();) {
        if (it->key != key) {
            ++it;
            continue;
        }
        answer(*it->member, it->id, store::Op::get, store::Status::ok, value);
        it = parked.erase(it);
    }
}

void StoreServer::State::drop(std::list<Member>::iterator it)
{
    parked.remove_if([&](const Parked& p) { return p.member == &*it; });
    // The keys it set while it lived go with it (a departed member's mark).
    for (auto o = owner_of.begin(); o != owner_of.end();) {
        if (o->second != &*it) {
            ++o;
            continue;
        }
        kv.erase(o->first);
        o = owner_of.erase(o);
    }
    key_count.store(kv.size(), std::memory_order_relaxed);
    if (it->through)
        through.fetch_sub(1, std::memory_order_relaxed);
    members.erase(it);
}

// ---- StoreServer ----

StoreServer::StoreServer(std::string_view host, std::uint16_t port, std::string_view secret)
    : state_(std::make_unique<State>(host, port, secret))
{
    state_->thread = std::thread([s = state_.get()] { s->run(); });
}

StoreServer::~StoreServer()
{
    state_->stopping.store(true);
    const std::uint64_t one = 1;
    (void)!::write(state_->wake.get(), &one, sizeof one);
    state_->thread.join();
}

std::uint16_t StoreServer::port() const noexcept { return state_->listener.port(); }

std::string StoreServer::address() const
{
    const std::string& host = state_->listener.host();
    const std::string shown = detail::is_wildcard(host) ? "127.0.0.1" : host;
    return shown.find(':') != std::string::npos ? fmt::format("[{}]:{}", shown, port())
                                                : fmt::format("{}:{}", shown, port());
}

std::size_t StoreServer::members() const { return state_->through.load(); }
std::size_t StoreServer::keys() const { return state_->key_count.load(); }

} // namespace weft
