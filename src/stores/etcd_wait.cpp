// SPDX-License-Identifier: MIT
// EtcdStore's waits: the mirror (one watch of the store's prefix, kept), a
// get of a key found absent, and the barrier.
#include <algorithm>

#include <fmt/format.h>

#include "etcd_http.hpp"
#include "etcd_mirror.hpp"
#include "random.hpp"

namespace weft {

using detail::etcd::b64;
using detail::etcd::call_timeout;
using detail::etcd::number;
using detail::etcd::prefix_end;

std::shared_ptr<EtcdStore::Mirror> EtcdStore::mirror(Deadline deadline)
{
    if (prefix_.empty())
        return nullptr;
    const std::lock_guard lock(mirror_m_);
    if (mirror_) {
        const std::lock_guard state(mirror_->m);
        if (!mirror_->ended.empty())
            mirror_.reset(); // broken (etcd restarted?): a new one
    }
    if (!mirror_)
        mirror_ = std::make_shared<Mirror>(watch("", deadline));
    return mirror_;
}

std::vector<std::byte> EtcdStore::wait_absent(std::string_view key, std::int64_t absent_at,
                                              Deadline deadline)
{
    if (deadline.expired())
        timeout(key);
    // Absent: a watch says when it is put (polling adds up to its interval
    // to every wait; QUIRKS.md has its share of a wire-up); the store's
    // mirror where it has one (it has every key put since it began, and
    // every one there then). The mirror may be behind etcd: an entry from a
    // put at or before `absent_at` is one erased since (the read saw none).
    try {
        if (const auto mine = mirror(deadline)) {
            std::vector<std::byte> got;
            if (!mine->wait(deadline, [&](const auto& kv) {
                    const auto it = kv.find(key);
                    if (it == kv.end() || it->second.revision <= absent_at)
                        return false;
                    got = it->second.value;
                    return true;
                }))
                timeout(key);
            return got;
        }
        EtcdWatch w = watch(key, deadline);
        while (const auto e = w.next(deadline))
            if (e->kind == EtcdEvent::Kind::put && e->key == key) // a prefix: exactly this key
                return e->value;
    } catch (const TimeoutError&) {
        throw;
    } catch (const Error& e) {
        if (deadline.expired())
            timeout(key);
        throw;
    }
    timeout(key);
}

std::string EtcdStore::arrivals(std::string_view key) const
{
    return prefix_ + '\0' + std::string(key) + "/arrived/";
}

void EtcdStore::barrier(std::string_view key, std::size_t size, Deadline deadline,
                        const Watch& check)
{
    // Each member puts a key of its own and counts the arrivals in one
    // transaction: one write each, none contended (a counting barrier's
    // compare-and-swap retries under contention; QUIRKS.md has its cost).
    // The member whose transaction
    // counts `size` sets `key`; the rest wait for it on the mirror (one
    // event each, where the arrivals themselves were `size` each).
    check_key("Store::barrier", key);
    const std::string dir = arrivals(key);
    const std::string mine = dir + fmt::format("{:016x}", detail::random_u64("a barrier member's key"));
    const json count = {{"request_range",
                         {{"key", b64(dir)}, {"range_end", b64(prefix_end(dir))}, {"count_only", true}}}};
    const json txn = {{"success", json::array({{{"request_put", {{"key", b64(mine)}, {"value", ""}}}},
                                               count})}};
    json a;
    {
        const std::lock_guard lock(m_);
        a = http_->post("/v3/kv/txn", txn, call_timeout);
    }
    const auto& answers = a.value("responses", json::array());
    std::size_t arrived = answers.size() == 2
                              ? static_cast<std::size_t>(number(answers[1]["response_range"], "count"))
                              : 0;
    const std::int64_t at = a.contains("header") ? number(a["header"], "revision") : 0;
    if (arrived >= size)
        return set(key, std::string_view("arrived"));
    for (;;) {
        // `key` is put after every arrival, this one's included: a put of it
        // after this transaction's revision is the one.
        const Deadline slice(std::min(deadline.when(), Clock::now() + std::chrono::seconds(1)));
        try {
            (void)wait_absent(key, at, slice);
            return;
        } catch (const TimeoutError&) {
        }
        // A slow barrier counts again (the last member may have ended between
        // its transaction and its put of `key`: each waiter sees it this way).
        json c;
        {
            const std::lock_guard lock(m_);
            c = http_->post("/v3/kv/range", count["request_range"], call_timeout);
        }
        if ((arrived = static_cast<std::size_t>(number(c, "count"))) >= size)
            return;
        if (deadline.expired())
            throw TimeoutError("Store::barrier", -FI_ETIMEDOUT, "",
                               fmt::format("barrier '{}': {} of {} members arrived in time in the {}",
                                           key, arrived, size, describe()));
        if (check)
            check();
    }
}

} // namespace weft
