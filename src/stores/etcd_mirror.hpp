// SPDX-License-Identifier: MIT
// EtcdStore::Mirror: the keys under an etcd store's prefix as one watch of
// the prefix sees them (etcd_store.cpp starts it at the store's first wait
// and keeps it). Its waits may see etcd's state a moment late, never out of
// order: an entry carries the revision of its last put.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"
#include "weft/stores/etcd_store.hpp"

namespace weft {

struct EtcdStore::Mirror {
    std::mutex m;
    std::condition_variable changed;
    struct Entry {
        std::vector<std::byte> value;
        std::int64_t revision = 0; // of its last put
    };
    std::map<std::string, Entry, std::less<>> kv; // without the store's prefix
    std::string ended; // why the watch broke
    bool stopping = false;
    EtcdWatch watch;
    std::thread applier; // the watch's events into `kv`

    explicit Mirror(EtcdWatch w) : watch(std::move(w))
    {
        applier = std::thread([this] { apply(); });
    }
    ~Mirror()
    {
        {
            const std::lock_guard lock(m);
            stopping = true;
        }
        applier.join(); // within one slice of next()
    }
    Mirror(const Mirror&) = delete;
    Mirror& operator=(const Mirror&) = delete;

    void apply()
    {
        for (;;) {
            std::optional<EtcdEvent> e;
            try {
                e = watch.next(Deadline::after(std::chrono::milliseconds(50)));
            } catch (const Error& err) {
                const std::lock_guard lock(m);
                ended = err.what();
                changed.notify_all();
                return;
            }
            const std::lock_guard lock(m);
            if (stopping)
                return;
            if (!e)
                continue;
            if (e->kind == EtcdEvent::Kind::put)
                kv.insert_or_assign(std::move(e->key), Entry{std::move(e->value), e->revision});
            else
                kv.erase(e->key);
            changed.notify_all();
        }
    }

    /// Waits until `ready(kv)` holds (true) or `deadline` passes (false);
    /// Error once the watch has broken.
    template <class Ready>
    bool wait(Deadline deadline, Ready&& ready)
    {
        std::unique_lock lock(m);
        changed.wait_until(lock, std::min(deadline.when(), Clock::now() + std::chrono::hours(24)),
                           [&] { return ready(kv) || !ended.empty(); });
        if (ready(kv))
            return true;
        if (!ended.empty())
            throw Error("EtcdStore", -FI_ECONNRESET, "", ended);
        return false;
    }
};

} // namespace weft
