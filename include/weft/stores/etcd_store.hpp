// SPDX-License-Identifier: MIT
/// @brief A Store on etcd (the metadata service NIXL and Mooncake use), for
/// long-lived services whose members come and go, through etcd's JSON
/// gateway (etcd 3.4: POST /v3/kv/..., /v3/lease/...).
///
/// Each EtcdStore holds a lease of `ttl`, kept alive by a thread of its own:
/// keys put with set_while_alive() live under it, so a member that crashes
/// loses them within `ttl` (its entry does not stay behind to mislead new
/// members, as NIXL's do), and one that closes revokes the lease at once.
/// get() of a key not there yet and barrier() wait on one watch of the
/// store's prefix, kept for all its waits; add() is a compare-and-swap
/// transaction; barrier() is a key per member, out of that watch's sight,
/// and the key itself once all have arrived; watch() streams a prefix's
/// changes.
/// Keys go under `prefix`; a key may not begin with a NUL byte (the store
/// keeps its barriers' arrivals there).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "weft/stores/store.hpp"

namespace weft {

/// One change under a watched prefix.
struct EtcdEvent {
    enum class Kind : std::uint8_t { put, erase };
    Kind kind = Kind::put;
    std::string key;              ///< without the store's prefix
    std::vector<std::byte> value; ///< put only
    std::int64_t revision = 0;    ///< etcd's revision of the change (0: not known)
};

/// A watch on a prefix (etcd's /v3/watch stream, read by a thread on a
/// connection of its own): first every key there when it was made, as puts,
/// then every change in etcd's order, none missed in between. A member's
/// key that expires with its lease, or goes with its revoke, is an erase.
class EtcdWatch {
public:
    EtcdWatch(EtcdWatch&&) noexcept;
    EtcdWatch& operator=(EtcdWatch&&) noexcept;
    ~EtcdWatch(); // ends the stream at once

    /// The next change, or none by `deadline`. Error once the stream has
    /// broken (etcd gone, the watch cancelled), naming why.
    std::optional<EtcdEvent> next(Deadline deadline);

    struct State;

private:
    friend class EtcdStore;
    explicit EtcdWatch(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

class EtcdStore final : public Store {
public:
    /// Connects to etcd at "host:port" and takes a lease of `ttl` (at least
    /// 1 s); retries a refused connection until `deadline` (etcd may start
    /// after its members).
    EtcdStore(std::string_view endpoint, Deadline deadline, std::string prefix = "",
              std::chrono::seconds ttl = std::chrono::seconds(2));
    ~EtcdStore() override; // revokes the lease: this member's live keys go at once
    EtcdStore(const EtcdStore&) = delete;
    EtcdStore& operator=(const EtcdStore&) = delete;

    using Store::barrier;
    using Store::get;
    using Store::set;
    using Store::set_while_alive;
    void set(std::string_view key, std::span<const std::byte> value) override;
    /// Under this store's lease: gone within `ttl` of this process's end.
    void set_while_alive(std::string_view key, std::span<const std::byte> value) override;
    std::vector<std::byte> get(std::string_view key, Deadline deadline) override;
    /// One range read of the keys' common prefix.
    std::vector<std::optional<std::vector<std::byte>>>
    get_now(std::span<const std::string> keys) override;
    /// Each member puts a key of its own and counts the arrivals in the same
    /// transaction; the last sets `key`, which the rest wait for.
    void barrier(std::string_view key, std::size_t size, Deadline deadline,
                 const Watch& watch) override;
    /// One keys-only range read of the keys' common prefix.
    std::vector<bool> live_each(std::span<const std::string> keys) override;
    std::vector<bool> contains_each(std::span<const std::string> keys) override;
    std::int64_t add(std::string_view key, std::int64_t delta) override;
    bool contains(std::string_view key) override;
    bool erase(std::string_view key) override;
    std::string describe() const override;

    /// Puts `key` under this store's lease only if no key of that name is
    /// there (one transaction): false when one is (a live member's).
    bool create_while_alive(std::string_view key, std::span<const std::byte> value);
    /// Erases `key` only if it is under this store's lease (one transaction):
    /// false when it is gone, or another store's now.
    bool erase_if_mine(std::string_view key);
    /// The keys under `prefix` now (without this store's own prefix), sorted:
    /// a service's view of who is there.
    std::vector<std::string> keys(std::string_view prefix);
    /// Watches the keys under `prefix` (a service's members: who joins, who
    /// leaves or dies); Error when etcd does not take the watch by `deadline`.
    EtcdWatch watch(std::string_view prefix, Deadline deadline);
    /// The lease's id, as etcd names it.
    std::int64_t lease() const noexcept { return lease_; }

    struct Http;

private:
    struct Mirror;
    /// The keys under this store's prefix as one watch of it sees them,
    /// started at the first wait and kept: every later wait (a get of a key
    /// not there yet, a barrier) waits on it instead of a watch of its own
    /// (a watch is a connection and a stream through the gateway; QUIRKS.md
    /// has its cost). Null for a store without a prefix (it
    /// would mirror all of etcd): its waits watch their keys one by one.
    std::shared_ptr<Mirror> mirror(Deadline deadline);
    /// get() of a key found absent at etcd's revision `absent_at`: waits on
    /// the mirror for a put after it (or on a watch of the key).
    std::vector<std::byte> wait_absent(std::string_view key, std::int64_t absent_at,
                                       Deadline deadline);

    std::string full(std::string_view key) const { return prefix_ + std::string(key); }
    /// Store::check_key, and no NUL first: the arrivals' space (below).
    static void check_key(std::string_view call, std::string_view key);
    /// Where barrier `key`'s members put their arrivals: under the prefix (a
    /// job's clean-up of its prefix takes them) but before every key a
    /// member may use, so outside the mirror's range: a watch of the prefix
    /// would carry every member's arrival to every member (QUIRKS.md has the
    /// count). Test: "etcd store: a barrier's arrivals stay out of the store's
    /// keys and watch".
    std::string arrivals(std::string_view key) const;
    /// A watch of the keys from `from` up to `end` (etcd's range_end).
    EtcdWatch watch_range(const std::string& from, const std::string& end, Deadline deadline);
    void put(std::string_view key, std::span<const std::byte> value, bool leased);
    void keep_alive();
    /// The longest prefix every key of `keys` starts with.
    static std::string_view common_prefix(std::span<const std::string> keys);
    /// The keys of `keys` there now (with their values if `values`), read
    /// in one range over their common prefix (callers give keys that share one).
    std::map<std::string, std::vector<std::byte>, std::less<>>
    under_common_prefix(std::string_view call, std::span<const std::string> keys, bool values);

    std::string endpoint_;
    std::string prefix_;
    std::chrono::seconds ttl_;
    std::mutex m_; // the calls' connection
    std::unique_ptr<Http> http_;
    std::int64_t lease_ = 0;
    std::mutex stop_m_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    std::atomic<bool> lease_lost_{false};
    std::string lease_error_;
    std::thread keeper_;
    std::mutex mirror_m_;
    std::shared_ptr<Mirror> mirror_;
};

} // namespace weft
