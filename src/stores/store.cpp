// SPDX-License-Identifier: MIT
// Store's calls built on the primitives (multi-get, barrier, text), and the
// in-process MemoryStore.
#include "weft/stores/store.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "store_count.hpp"
#include "weft/base/error.hpp"

namespace weft {

void Store::check_key(std::string_view call, std::string_view key)
{
    if (key.empty() || key.size() > 200)
        throw UsageError(std::string(call), -FI_EINVAL, "",
                         fmt::format("a store key has 1 to 200 characters, not {}", key.size()));
}

void Store::not_a_count(std::string_view key) const
{
    throw UsageError("Store::add", -FI_EINVAL, "",
                     fmt::format("key '{}' in the {} holds a value that is not a decimal integer: "
                                 "add() counts only in keys that set() leaves alone",
                                 key, describe()));
}

void Store::timeout(std::string_view key) const
{
    throw TimeoutError("Store::get", -FI_ETIMEDOUT, "",
                       fmt::format("key '{}' was not set in time in the {}: is every member "
                                   "running, and do they agree on the key names?",
                                   key, describe()));
}

std::vector<std::optional<std::vector<std::byte>>>
Store::get_now(std::span<const std::string> keys)
{
    std::vector<std::optional<std::vector<std::byte>>> out;
    out.reserve(keys.size());
    for (const auto& key : keys) {
        try {
            out.emplace_back(get(key, Deadline(Clock::now())));
        } catch (const TimeoutError&) {
            out.emplace_back();
        }
    }
    return out;
}

std::vector<std::vector<std::byte>> Store::get(std::span<const std::string> keys,
                                               Deadline deadline)
{
    return gather(keys, deadline, {});
}

std::vector<std::vector<std::byte>> Store::gather(std::span<const std::string> keys,
                                                  Deadline deadline, const Watch& watch)
{
    // What is there, in one get_now() (one request on the TCP store and
    // etcd); then a wait for the first key still missing, and again for the
    // rest: a key once read is not asked for again. With a watch, each wait
    // is get()'s with a watch: slices of a second, `watch` between them.
    std::vector<std::optional<std::vector<std::byte>>> got(keys.size());
    std::vector<std::string> missing;
    std::vector<std::size_t> at;
    const auto look = [&] {
        missing.clear();
        at.clear();
        for (std::size_t i = 0; i < keys.size(); ++i)
            if (!got[i]) {
                missing.push_back(keys[i]);
                at.push_back(i);
            }
        if (missing.empty())
            return true;
        auto now = get_now(missing);
        bool all = true;
        for (std::size_t j = 0; j < at.size(); ++j) {
            all = all && now[j].has_value();
            got[at[j]] = std::move(now[j]);
        }
        return all;
    };
    while (!look()) {
        const auto first = static_cast<std::size_t>(
            std::ranges::find_if(got, [](const auto& v) { return !v; }) - got.begin());
        got[first] = get(keys[first], deadline, watch);
    }
    std::vector<std::vector<std::byte>> out;
    out.reserve(keys.size());
    for (auto& v : got)
        out.push_back(std::move(*v));
    return out;
}

std::string Store::get_text(std::string_view key, Deadline deadline)
{
    const auto v = get(key, deadline);
    return {reinterpret_cast<const char*>(v.data()), v.size()};
}

std::vector<std::byte> Store::get(std::string_view key, Deadline deadline, const Watch& watch)
{
    if (!watch)
        return get(key, deadline);
    for (;;) {
        const Deadline slice(std::min(deadline.when(), Clock::now() + std::chrono::seconds(1)));
        try {
            return get(key, slice);
        } catch (const TimeoutError&) {
            if (deadline.expired())
                throw;
        }
        try {
            watch();
        } catch (const Error&) {
            // A member that set its part and then ended (it passed the
            // barrier this member is still in, and exited) has not failed
            // this wait: look once more before saying so.
            try {
                return get(key, Deadline(Clock::now()));
            } catch (const TimeoutError&) {
            }
            throw;
        }
    }
}

std::vector<std::vector<std::byte>> Store::get(std::span<const std::string> keys,
                                               Deadline deadline, const Watch& watch)
{
    return watch ? gather(keys, deadline, watch) : get(keys, deadline);
}

std::vector<bool> Store::contains_each(std::span<const std::string> keys)
{
    std::vector<bool> out;
    out.reserve(keys.size());
    for (const std::string& k : keys)
        out.push_back(contains(k));
    return out;
}

std::vector<bool> Store::live_each(std::span<const std::string> keys)
{
    std::vector<bool> out;
    out.reserve(keys.size());
    for (const std::string& k : keys)
        out.push_back(live(k));
    return out;
}

void Store::barrier(std::string_view key, std::size_t size, Deadline deadline, const Watch& watch)
{
    const std::string arrived = fmt::format("{}/arrived", key);
    const std::string open = fmt::format("{}/open", key);
    if (add(arrived, 1) == static_cast<std::int64_t>(size))
        set(open, std::string_view("1"));
    try {
        (void)get(open, deadline, watch);
    } catch (const TimeoutError&) {
        throw TimeoutError("Store::barrier", -FI_ETIMEDOUT, "",
                           fmt::format("barrier '{}': {} of {} members arrived in time in the {}",
                                       key, add(arrived, 0), size, describe()));
    }
}

// ---- MemoryStore ----

void MemoryStore::set(std::string_view key, std::span<const std::byte> value)
{
    check_key("Store::set", key);
    {
        const std::lock_guard lock(m_);
        kv_.insert_or_assign(std::string(key), std::vector<std::byte>(value.begin(), value.end()));
    }
    changed_.notify_all();
}

std::vector<std::byte> MemoryStore::get(std::string_view key, Deadline deadline)
{
    check_key("Store::get", key);
    std::unique_lock lock(m_);
    for (;;) {
        if (const auto it = kv_.find(key); it != kv_.end())
            return it->second;
        if (deadline.expired())
            timeout(key);
        // At most a second at a time: never() is time_point::max().
        (void)changed_.wait_for(lock, std::min(deadline.remaining(),
                                               Clock::duration(std::chrono::seconds(1))));
    }
}

std::int64_t MemoryStore::add(std::string_view key, std::int64_t delta)
{
    check_key("Store::add", key);
    std::int64_t sum = delta;
    {
        const std::lock_guard lock(m_);
        auto& v = kv_[std::string(key)];
        const auto was = detail::parse_count(v);
        if (!was)
            not_a_count(key);
        sum += *was;
        v = detail::count_text(sum);
    }
    changed_.notify_all();
    return sum;
}

bool MemoryStore::contains(std::string_view key)
{
    check_key("Store::contains", key);
    const std::lock_guard lock(m_);
    return kv_.contains(key);
}

bool MemoryStore::erase(std::string_view key)
{
    check_key("Store::erase", key);
    const std::lock_guard lock(m_);
    const auto it = kv_.find(key);
    if (it == kv_.end())
        return false;
    kv_.erase(it);
    return true;
}

} // namespace weft
