// SPDX-License-Identifier: MIT
// EtcdStore over etcd's JSON gateway, with libcurl (a kept HTTP client beats a
// hand-written one) and nlohmann-json; keys and values travel base64-encoded.
#include "weft/stores/etcd_store.hpp"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "etcd_http.hpp"
#include "store_count.hpp"
#include "weft/base/error.hpp"

namespace weft {

using json = nlohmann::json;

namespace {

using detail::etcd::b64;
using detail::etcd::number;
using detail::etcd::prefix_end;
using detail::etcd::unb64;

const struct CurlInit {
    CurlInit() { curl_global_init(CURL_GLOBAL_DEFAULT); }
} curl_init;

} // namespace

using detail::etcd::call_timeout;

EtcdStore::EtcdStore(std::string_view endpoint, Deadline deadline, std::string prefix,
                     std::chrono::seconds ttl)
    : endpoint_(endpoint), prefix_(std::move(prefix)), ttl_(std::max(ttl, std::chrono::seconds(1))),
      http_(std::make_unique<Http>(endpoint_))
{
    // etcd may start after its members: a refused connection is tried again.
    for (auto wait = std::chrono::milliseconds(10);; wait = std::min(wait * 2, std::chrono::milliseconds(500))) {
        try {
            lease_ = number(http_->post("/v3/lease/grant", {{"TTL", ttl_.count()}}, call_timeout), "ID");
            break;
        } catch (const Error& e) {
            if (e.code() != -FI_ECONNREFUSED || deadline.expired())
                throw Error("EtcdStore", e.code(), "",
                            fmt::format("{} (is etcd running there? its client URL is "
                                        "--listen-client-urls)",
                                        e.what()));
            std::this_thread::sleep_for(wait);
        }
    }
    if (lease_ == 0)
        throw Error("EtcdStore", -EPROTO, "", "etcd granted no lease");
    keeper_ = std::thread([this] { keep_alive(); });
}

EtcdStore::~EtcdStore()
{
    mirror_.reset(); // its watch first: it reads from etcd on a thread
    {
        const std::lock_guard lock(stop_m_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    keeper_.join();
    try {
        const std::lock_guard lock(m_);
        (void)http_->post("/v3/lease/revoke", {{"ID", std::to_string(lease_)}}, call_timeout);
    } catch (const std::exception&) {
        // etcd is gone: the lease expires there on its own
    }
}

void EtcdStore::keep_alive()
{
    Http http(endpoint_); // a connection of its own: calls may wait on theirs
    std::unique_lock lock(stop_m_);
    while (!stop_cv_.wait_for(lock, ttl_ / 3, [this] { return stopping_; })) {
        lock.unlock();
        try {
            const json a = http.post("/v3/lease/keepalive", {{"ID", std::to_string(lease_)}},
                                     std::chrono::duration_cast<std::chrono::milliseconds>(ttl_));
            if (number(a, "TTL") <= 0) {
                lease_error_ = "etcd says the lease expired (this process stalled longer than "
                               "its TTL?)";
                lease_lost_ = true;
            }
        } catch (const std::exception& e) {
            lease_error_ = e.what();
            lease_lost_ = true;
        }
        lock.lock();
    }
}

std::string EtcdStore::describe() const
{
    return fmt::format("etcd store at {} (lease {:x}, TTL {} s)", endpoint_, lease_, ttl_.count());
}

void EtcdStore::put(std::string_view key, std::span<const std::byte> value, bool leased)
{
    json r = {{"key", b64(full(key))}, {"value", b64(value)}};
    if (leased) {
        if (lease_lost_)
            throw Error("Store::set_while_alive", -FI_ECONNRESET, "",
                        fmt::format("the {}'s lease is lost: {}", describe(), lease_error_));
        r["lease"] = std::to_string(lease_);
    }
    const std::lock_guard lock(m_);
    (void)http_->post("/v3/kv/put", r, call_timeout);
}

void EtcdStore::set(std::string_view key, std::span<const std::byte> value)
{
    check_key("Store::set", key);
    put(key, value, false);
}

void EtcdStore::set_while_alive(std::string_view key, std::span<const std::byte> value)
{
    check_key("Store::set_while_alive", key);
    put(key, value, true);
}

bool EtcdStore::create_while_alive(std::string_view key, std::span<const std::byte> value)
{
    check_key("EtcdStore::create_while_alive", key);
    if (lease_lost_)
        throw Error("EtcdStore::create_while_alive", -FI_ECONNRESET, "",
                    fmt::format("the {}'s lease is lost: {}", describe(), lease_error_));
    const std::string k = b64(full(key));
    const json txn = {
        {"compare", json::array({{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
        {"success", json::array({{{"request_put",
                                   {{"key", k}, {"value", b64(value)}, {"lease", std::to_string(lease_)}}}}})}};
    const std::lock_guard lock(m_);
    return http_->post("/v3/kv/txn", txn, call_timeout).value("succeeded", false);
}

bool EtcdStore::erase_if_mine(std::string_view key)
{
    check_key("EtcdStore::erase_if_mine", key);
    const std::string k = b64(full(key));
    const json txn = {
        {"compare", json::array({{{"key", k}, {"target", "LEASE"}, {"lease", std::to_string(lease_)}}})},
        {"success", json::array({{{"request_delete_range", {{"key", k}}}}})}};
    const std::lock_guard lock(m_);
    return http_->post("/v3/kv/txn", txn, call_timeout).value("succeeded", false);
}

std::vector<std::byte> EtcdStore::get(std::string_view key, Deadline deadline)
{
    check_key("Store::get", key);
    json a;
    {
        const std::lock_guard lock(m_);
        a = http_->post("/v3/kv/range", {{"key", b64(full(key))}}, call_timeout);
    }
    const auto value = [](const json& kv) {
        return kv.contains("value") ? unb64(kv["value"].get<std::string>())
                                    : std::vector<std::byte>{};
    };
    if (a.contains("kvs") && !a["kvs"].empty())
        return value(a["kvs"][0]);
    return wait_absent(key, a.contains("header") ? number(a["header"], "revision") : 0, deadline);
}

std::string_view EtcdStore::common_prefix(std::span<const std::string> keys)
{
    std::string_view common = keys.empty() ? std::string_view() : std::string_view(keys[0]);
    for (const std::string& k : keys) {
        std::size_t n = 0;
        while (n < common.size() && n < k.size() && common[n] == k[n])
            ++n;
        common = common.substr(0, n);
    }
    return common;
}

std::map<std::string, std::vector<std::byte>, std::less<>>
EtcdStore::under_common_prefix(std::string_view call, std::span<const std::string> keys,
                               bool values)
{
    for (const std::string& k : keys)
        check_key(call, k);
    const std::string_view common = common_prefix(keys);
    std::map<std::string, std::vector<std::byte>, std::less<>> found;
    if (common.empty())
        return found;
    const std::string from = full(common);
    json request = {{"key", b64(from)}, {"range_end", b64(prefix_end(from))}};
    if (!values)
        request["keys_only"] = true;
    json a;
    {
        const std::lock_guard lock(m_);
        a = http_->post("/v3/kv/range", request, call_timeout);
    }
    for (const json& kv : a.value("kvs", json::array())) {
        const auto raw = unb64(kv["key"].get<std::string>());
        std::string k(reinterpret_cast<const char*>(raw.data()), raw.size());
        found.emplace(k.substr(prefix_.size()), kv.contains("value")
                                                    ? unb64(kv["value"].get<std::string>())
                                                    : std::vector<std::byte>{});
    }
    return found;
}

std::vector<bool> EtcdStore::live_each(std::span<const std::string> keys)
{
    return contains_each(keys); // a live key is one whose lease has not ended
}

std::vector<bool> EtcdStore::contains_each(std::span<const std::string> keys)
{
    if (keys.size() > 1 && common_prefix(keys).empty())
        return Store::contains_each(keys); // nothing shared to range over
    const auto found = under_common_prefix("Store::contains", keys, false);
    std::vector<bool> out;
    out.reserve(keys.size());
    for (const std::string& k : keys)
        out.push_back(found.contains(k));
    return out;
}

std::vector<std::optional<std::vector<std::byte>>>
EtcdStore::get_now(std::span<const std::string> keys)
{
    // One range read of the keys' common prefix (a group's "node/0".."node/63"):
    // N requests become one.
    if (keys.size() > 1 && common_prefix(keys).empty())
        return Store::get_now(keys);
    auto found = under_common_prefix("Store::get", keys, true);
    std::vector<std::optional<std::vector<std::byte>>> out;
    out.reserve(keys.size());
    for (const std::string& k : keys) {
        const auto it = found.find(k);
        if (it != found.end())
            out.emplace_back(std::move(it->second));
        else
            out.emplace_back();
    }
    return out;
}

void EtcdStore::check_key(std::string_view call, std::string_view key)
{
    Store::check_key(call, key);
    if (key.front() == '\0')
        throw UsageError(std::string(call), -FI_EINVAL, "",
                         "an etcd store key may not begin with a NUL byte: the store keeps its "
                         "barriers there");
}

bool EtcdStore::contains(std::string_view key)
{
    check_key("Store::contains", key);
    const std::lock_guard lock(m_);
    const json a = http_->post("/v3/kv/range", {{"key", b64(full(key))}, {"count_only", true}},
                               call_timeout);
    return number(a, "count") > 0;
}

bool EtcdStore::erase(std::string_view key)
{
    check_key("Store::erase", key);
    const std::lock_guard lock(m_);
    const json a = http_->post("/v3/kv/deleterange", {{"key", b64(full(key))}}, call_timeout);
    return number(a, "deleted") > 0;
}

std::int64_t EtcdStore::add(std::string_view key, std::int64_t delta)
{
    check_key("Store::add", key);
    const std::string k = b64(full(key));
    const std::lock_guard lock(m_);
    for (;;) {
        // Read the count and its revision, then write the sum only if nobody
        // wrote in between (a compare-and-swap transaction); else again.
        const json a = http_->post("/v3/kv/range", {{"key", k}}, call_timeout);
        std::vector<std::byte> v;
        json compare;
        if (a.contains("kvs") && !a["kvs"].empty()) {
            const json& kv = a["kvs"][0];
            if (kv.contains("value"))
                v = unb64(kv["value"].get<std::string>());
            compare = {{"key", k}, {"target", "MOD"}, {"mod_revision", std::to_string(number(kv, "mod_revision"))}};
        } else {
            compare = {{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}};
        }
        const auto was = detail::parse_count(v);
        if (!was)
            not_a_count(key);
        const std::int64_t sum = *was + delta;
        const json txn = {{"compare", json::array({compare})},
                          {"success", json::array({{{"request_put",
                                                     {{"key", k}, {"value", b64(std::span<const std::byte>(detail::count_text(sum)))}}}}})}};
        const json t = http_->post("/v3/kv/txn", txn, call_timeout);
        if (t.value("succeeded", false))
            return sum;
    }
}

std::vector<std::string> EtcdStore::keys(std::string_view prefix)
{
    const std::string from = full(prefix);
    const std::lock_guard lock(m_);
    const json a = http_->post("/v3/kv/range",
                               {{"key", b64(from)}, {"range_end", b64(prefix_end(from))}, {"keys_only", true}},
                               call_timeout);
    std::vector<std::string> out;
    if (a.contains("kvs"))
        for (const auto& kv : a["kvs"]) {
            const auto raw = unb64(kv["key"].get<std::string>());
            std::string key(reinterpret_cast<const char*>(raw.data()), raw.size());
            key.erase(0, prefix_.size());
            if (!key.empty() && key.front() != '\0') // not a barrier's arrival
                out.push_back(std::move(key));
        }
    std::ranges::sort(out);
    return out;
}

} // namespace weft
