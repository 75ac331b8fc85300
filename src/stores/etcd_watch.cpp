// SPDX-License-Identifier: MIT
// EtcdStore::watch: a range read of the prefix, then etcd's watch stream from
// the revision after it (so no change between the two is missed), read on a
// thread of its own through libcurl's multi interface, which a destructor can
// wake (curl_multi_wakeup) instead of waiting out a poll.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "etcd_http.hpp"

namespace weft {

using detail::etcd::b64;
using detail::etcd::number;
using detail::etcd::prefix_end;
using detail::etcd::unb64;

struct EtcdWatch::State {
    std::string endpoint;
    std::size_t strip = 0; // the store's prefix, taken off every key
    CURLM* multi = nullptr;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::string request;
    std::string partial; // the stream's bytes after its last newline

    std::mutex m;
    std::condition_variable changed;
    std::deque<EtcdEvent> events;
    bool created = false;
    std::string ended; // why the stream ended, once it has
    bool stop = false;
    std::thread reader;

    ~State()
    {
        {
            const std::lock_guard lock(m);
            stop = true;
        }
        if (multi)
            curl_multi_wakeup(multi);
        if (reader.joinable())
            reader.join();
        if (multi && easy)
            curl_multi_remove_handle(multi, easy);
        if (easy)
            curl_easy_cleanup(easy);
        if (multi)
            curl_multi_cleanup(multi);
        curl_slist_free_all(headers);
    }

    void end(std::string why)
    {
        const std::lock_guard lock(m);
        if (ended.empty())
            ended = std::move(why);
        changed.notify_all();
    }

    /// One message of the stream (a line of JSON).
    void take(std::string_view line)
    {
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded())
            return end(fmt::format("etcd at {} sent a watch message that is not JSON: {}",
                                   endpoint, line.substr(0, 200)));
        if (j.contains("error"))
            return end(fmt::format("etcd at {} ended the watch: {}", endpoint,
                                   j["error"].dump()));
        const json& r = j.contains("result") ? j["result"] : j;
        if (r.value("canceled", false))
            return end(fmt::format("etcd at {} cancelled the watch: {}", endpoint,
                                   r.value("cancel_reason", std::string("no reason given"))));
        const std::lock_guard lock(m);
        if (r.value("created", false))
            created = true;
        if (r.contains("events"))
            for (const json& e : r["events"]) {
                EtcdEvent ev;
                ev.kind = e.value("type", std::string("PUT")) == "DELETE" ? EtcdEvent::Kind::erase
                                                                          : EtcdEvent::Kind::put;
                const json& kv = e["kv"];
                const auto raw = unb64(kv["key"].get<std::string>());
                ev.key.assign(reinterpret_cast<const char*>(raw.data()), raw.size());
                ev.key.erase(0, strip);
                if (ev.kind == EtcdEvent::Kind::put && kv.contains("value"))
                    ev.value = unb64(kv["value"].get<std::string>());
                if (kv.contains("mod_revision"))
                    ev.revision = number(kv, "mod_revision");
                events.push_back(std::move(ev));
            }
        changed.notify_all();
    }

    static size_t on_data(char* p, size_t, size_t n, void* to)
    {
        auto& s = *static_cast<State*>(to);
        s.partial.append(p, n);
        for (std::size_t nl; (nl = s.partial.find('\n')) != std::string::npos;) {
            s.take(std::string_view(s.partial).substr(0, nl));
            s.partial.erase(0, nl + 1);
        }
        return n;
    }

    void read()
    {
        for (;;) {
            int running = 0;
            curl_multi_perform(multi, &running);
            if (running == 0) {
                int left = 0;
                CURLMsg* msg = curl_multi_info_read(multi, &left);
                const CURLcode rc = msg ? msg->data.result : CURLE_OK;
                return end(fmt::format("etcd at {} closed the watch stream ({})", endpoint,
                                       rc == CURLE_OK ? "it ended" : curl_easy_strerror(rc)));
            }
            curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
            const std::lock_guard lock(m);
            if (stop)
                return;
        }
    }
};

namespace {

/// A deadline a condition variable can wait until (never() is far too far).
Clock::time_point until(Deadline d)
{
    return std::min(d.when(), Clock::now() + std::chrono::hours(24));
}

} // namespace

EtcdWatch::EtcdWatch(std::unique_ptr<State> state) : state_(std::move(state)) {}
EtcdWatch::EtcdWatch(EtcdWatch&&) noexcept = default;
EtcdWatch& EtcdWatch::operator=(EtcdWatch&&) noexcept = default;
EtcdWatch::~EtcdWatch() = default;

std::optional<EtcdEvent> EtcdWatch::next(Deadline deadline)
{
    State& s = *state_;
    std::unique_lock lock(s.m);
    s.changed.wait_until(lock, until(deadline),
                         [&] { return !s.events.empty() || !s.ended.empty(); });
    if (!s.events.empty()) {
        EtcdEvent e = std::move(s.events.front());
        s.events.pop_front();
        return e;
    }
    if (!s.ended.empty())
        throw Error("EtcdWatch", -FI_ECONNRESET, "", s.ended);
    return std::nullopt;
}

EtcdWatch EtcdStore::watch(std::string_view prefix, Deadline deadline)
{
    // The whole store: from its first key a member may use (past the
    // barriers' arrivals, which begin with a NUL byte).
    const std::string from = prefix.empty() ? full(std::string_view("\x01", 1)) : full(prefix);
    return watch_range(from, prefix_end(full(prefix)), deadline);
}

EtcdWatch EtcdStore::watch_range(const std::string& from, const std::string& end,
                                 Deadline deadline)
{
    auto s = std::make_unique<EtcdWatch::State>();
    s->endpoint = endpoint_;
    s->strip = prefix_.size();
    // What is there now, and the revision it was read at.
    json now;
    {
        const std::lock_guard lock(m_);
        now = http_->post("/v3/kv/range", {{"key", b64(from)}, {"range_end", b64(end)}},
                          std::chrono::milliseconds(10000));
    }
    const std::int64_t revision = now.contains("header") ? number(now["header"], "revision") : 0;
    json initial = json::array();
    for (const json& kv : now.value("kvs", json::array()))
        initial.push_back({{"kv", kv}}); // an event without a type: a put
    s->take(json{{"result", {{"events", initial}}}}.dump());

    s->request = json{{"create_request",
                       {{"key", b64(from)},
                        {"range_end", b64(end)},
                        {"start_revision", std::to_string(revision + 1)}}}}
                     .dump();
    s->multi = curl_multi_init();
    s->easy = curl_easy_init();
    if (!s->multi || !s->easy)
        throw Error("EtcdStore::watch", -FI_ENOMEM, "", "libcurl could not start");
    const std::string url = "http://" + endpoint_ + "/v3/watch";
    s->headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_setopt(s->easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->request.c_str());
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(s->request.size()));
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, &EtcdWatch::State::on_data);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s.get());
    curl_multi_add_handle(s->multi, s->easy);
    s->reader = std::thread([st = s.get()] { st->read(); });

    // Returned once etcd has taken it: its errors are the caller's now.
    std::unique_lock lock(s->m);
    s->changed.wait_until(lock, until(deadline), [&] { return s->created || !s->ended.empty(); });
    if (!s->created) {
        const std::string why = s->ended.empty()
                                    ? fmt::format("etcd at {} did not take a watch on '{}' in time",
                                                  endpoint_, from)
                                    : s->ended;
        lock.unlock();
        throw Error("EtcdStore::watch", -FI_ETIMEDOUT, "", why);
    }
    lock.unlock();
    return EtcdWatch(std::move(s));
}

} // namespace weft
