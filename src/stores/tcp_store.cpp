// SPDX-License-Identifier: MIT
// TcpStore: a member's connection to a StoreServer, one request at a time.
#include "weft/stores/tcp_store.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "side_wire.hpp"
#include "socket.hpp"
#include "store_wire.hpp"
#include "weft/base/error.hpp"

namespace weft {

namespace store = detail::store;

namespace {

SideChannel connect_to(std::string_view host_port, Deadline deadline, std::string_view secret)
{
    const auto [host, port] = split_host_port(host_port);
    return SideChannel::connect(host, port, deadline, resolve_secret(secret));
}

std::uint32_t wait_ms(Deadline deadline)
{
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline.remaining());
    return static_cast<std::uint32_t>(std::min<std::int64_t>(ms.count(), UINT32_MAX));
}

} // namespace

struct TcpStore::Request : store::Request {};
struct TcpStore::Answer : store::Answer {};

TcpStore::TcpStore(std::string_view host_port, Deadline deadline, std::string_view secret)
    : channel_(connect_to(host_port, deadline, secret)), server_(host_port)
{
}

TcpStore::~TcpStore() = default;

std::string TcpStore::describe() const { return fmt::format("TCP store at {}", server_); }

TcpStore::Answer TcpStore::call(std::string_view name, std::uint8_t op, std::string_view key,
                                std::span<const std::byte> body, Deadline deadline)
{
    check_key(name, key);
    Request r;
    r.op = static_cast<store::Op>(op);
    r.key = key;
    return call(name, std::move(r), body, deadline);
}

TcpStore::Answer TcpStore::call(std::string_view name, Request r,
                                std::span<const std::byte> body, Deadline deadline)
{
    const std::string key = r.key.empty() ? fmt::format("{} keys", r.keys.size()) : r.key;
    if (r.op == store::Op::set || r.op == store::Op::set_owned) {
        r.value.assign(body.begin(), body.end());
        if (r.value.size() + key.size() + 64 > detail::side::max_payload)
            throw UsageError(std::string(name), -FI_EMSGSIZE, "",
                             fmt::format("a TCP store value holds at most ~1 MiB, not {} B: put "
                                         "large data in registered memory and publish its "
                                         "RemoteRegion instead",
                                         r.value.size()));
    }
    if (r.op == store::Op::add)
        std::memcpy(&r.delta, body.data(), sizeof r.delta);
    // The server answers a parked get at its deadline; allow the answer time
    // to travel before calling the server unresponsive.
    const bool waits = r.op == store::Op::get;
    r.wait_ms = waits ? wait_ms(deadline) : 0;
    const Deadline answer_by =
        waits ? Deadline(deadline.when() == Deadline::never().when()
                             ? deadline.when()
                             : deadline.when() + std::chrono::seconds(5))
              : Deadline::after(answer_timeout);

    std::unique_lock lock(m_);
    r.id = next_id_++;
    lock.unlock();
    try {
        {
            const std::lock_guard sending(send_m_);
            channel_.send(detail::Frame::store, store::encode(r), answer_by);
        }
        lock.lock();
        return Answer{store::decode_answer(await(lock, r.id, answer_by), r.op)};
    } catch (const TimeoutError&) {
        throw TimeoutError(std::string(name), -FI_ETIMEDOUT, "",
                           fmt::format("the {} did not answer for '{}' in time: is its StoreServer "
                                       "(rank 0's, or a store service's) still running?",
                                       describe(), key));
    }
}

std::vector<std::byte> TcpStore::await(std::unique_lock<std::mutex>& lock, std::uint32_t id,
                                       Deadline answer_by)
{
    // Leader and followers: the caller that finds nobody reading reads every
    // answer, files it under its id and wakes the others; when its own is
    // there it hands the reading on.
    using namespace std::chrono_literals;
    for (;;) {
        if (const auto it = arrived_.find(id); it != arrived_.end()) {
            auto payload = std::move(it->second);
            arrived_.erase(it);
            return payload;
        }
        if (!broken_.empty())
            throw Error("Store", -FI_ECONNRESET, "", broken_);
        if (answer_by.expired()) {
            abandoned_.insert(id);
            detail::side_fail(-FI_ETIMEDOUT, "no answer");
        }
        if (reading_) {
            arrived_cv_.wait_until(lock, std::min(answer_by.when(), Clock::now() + 100ms));
            continue;
        }
        reading_ = true;
        lock.unlock();
        std::vector<std::byte> payload;
        std::string failed;
        try {
            // A whole frame is read only once it has begun to arrive, so
            // that giving up at a deadline never leaves half of one behind.
            if (channel_.readable(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::min<Clock::duration>(answer_by.remaining(), 100ms))))
                payload = channel_.receive(detail::Frame::store_answer, Deadline::after(answer_timeout));
        } catch (const std::exception& e) {
            failed = fmt::format("the connection to the {} failed: {}", describe(), e.what());
        }
        lock.lock();
        reading_ = false;
        if (!failed.empty())
            broken_ = failed;
        else if (!payload.empty()) {
            const std::uint32_t got = store::answer_id(payload);
            if (abandoned_.erase(got) == 0)
                arrived_.insert_or_assign(got, std::move(payload));
        }
        arrived_cv_.notify_all();
    }
}

void TcpStore::set(std::string_view key, std::span<const std::byte> value)
{
    (void)call("Store::set", static_cast<std::uint8_t>(store::Op::set), key, value,
               Deadline::never());
}

std::vector<std::byte> TcpStore::get(std::string_view key, Deadline deadline)
{
    auto a = call("Store::get", static_cast<std::uint8_t>(store::Op::get), key, {}, deadline);
    if (a.status == store::Status::absent)
        timeout(key);
    return std::move(a.value);
}

std::int64_t TcpStore::add(std::string_view key, std::int64_t delta)
{
    const auto a = call("Store::add", static_cast<std::uint8_t>(store::Op::add), key,
                        std::as_bytes(std::span(&delta, 1)), Deadline::never());
    if (a.status == store::Status::not_a_number)
        not_a_count(key);
    return a.sum;
}

void TcpStore::set_while_alive(std::string_view key, std::span<const std::byte> value)
{
    (void)call("Store::set_while_alive", static_cast<std::uint8_t>(store::Op::set_owned), key, value,
               Deadline::never());
}

bool TcpStore::contains(std::string_view key)
{
    return call("Store::contains", static_cast<std::uint8_t>(store::Op::contains), key, {},
                Deadline::never())
               .status == store::Status::ok;
}

std::vector<bool> TcpStore::contains_each(std::span<const std::string> keys)
{
    // In slices, so that each request stays well under a frame's ~1 MiB.
    constexpr std::size_t per_request = 1024;
    std::vector<bool> out;
    out.reserve(keys.size());
    for (std::size_t at = 0; at < keys.size(); at += per_request) {
        Request r;
        r.op = store::Op::contains_each;
        for (std::size_t i = at; i < std::min(keys.size(), at + per_request); ++i) {
            check_key("Store::contains_each", keys[i]);
            r.keys.push_back(keys[i]);
        }
        const auto a = call("Store::contains_each", std::move(r), {}, Deadline::never());
        if (a.value.size() != std::min(per_request, keys.size() - at))
            throw Error("Store::contains_each", -EPROTO, "",
                        fmt::format("the {} answered {} of {} keys: it is not a weft program of "
                                    "this version",
                                    describe(), a.value.size(), keys.size() - at));
        for (const std::byte b : a.value)
            out.push_back(b != std::byte{0});
    }
    return out;
}

std::vector<std::optional<std::vector<std::byte>>>
TcpStore::get_now(std::span<const std::string> keys)
{
    std::vector<std::optional<std::vector<std::byte>>> out(keys.size());
    for (const std::string& k : keys)
        check_key("Store::get", k);
    // Requests of up to 1024 keys; the keys whose values did not fit in an
    // answer are asked again, and one too large for any answer alone by get().
    constexpr std::size_t per_request = 1024;
    std::vector<std::size_t> ask(keys.size());
    for (std::size_t i = 0; i < ask.size(); ++i)
        ask[i] = i;
    while (!ask.empty()) {
        Request r;
        r.op = store::Op::get_each;
        const std::size_t n = std::min(per_request, ask.size());
        for (std::size_t j = 0; j < n; ++j)
            r.keys.push_back(keys[ask[j]]);
        const auto a = call("Store::get", std::move(r), {}, Deadline::never());
        wire::Reader in(a.value, "store get_each answer", "TCP store");
        std::vector<std::size_t> again;
        for (std::size_t j = 0; j < n; ++j) {
            const auto mark = in.u8();
            if (mark == static_cast<std::uint8_t>(store::Each::value))
                out[ask[j]] = in.bytes();
            else if (mark == static_cast<std::uint8_t>(store::Each::ask_again))
                again.push_back(ask[j]);
            else if (mark != static_cast<std::uint8_t>(store::Each::absent))
                throw Error("Store::get", -EPROTO, "",
                            fmt::format("the {} marked a key {}: it is not a weft program of "
                                        "this version",
                                        describe(), mark));
        }
        in.finish();
        if (!again.empty() && again.front() == ask.front()) {
            // Too large to share an answer: its own get.
            try {
                out[again.front()] = get(keys[again.front()], Deadline(Clock::now()));
            } catch (const TimeoutError&) { // erased since
            }
            again.erase(again.begin());
        }
        again.insert(again.end(), ask.begin() + static_cast<std::ptrdiff_t>(n), ask.end());
        ask = std::move(again);
    }
    return out;
}

bool TcpStore::erase(std::string_view key)
{
    return call("Store::erase", static_cast<std::uint8_t>(store::Op::erase), key, {},
                Deadline::never())
               .status == store::Status::ok;
}

} // namespace weft
