// SPDX-License-Identifier: MIT
/// @brief A small key-value store for rendezvous: members of a group publish
/// what the others need (Node addresses, RemoteRegions, the provider choice)
/// and wait for what they need. Every blocking call has a deadline.
///
/// Implementations: MemoryStore (members are threads of one process) and
/// FileStore (a directory every member sees). The contract, proven by the same
/// tests on each (the "store: ..." test cases):
///   - set() replaces; get() waits until the key exists, else TimeoutError
///     naming the key; erase() removes.
///   - add() is atomic across members: N members adding 1 each see N distinct
///     results, the last one N. Its value reads back with get() as decimal text.
///   - barrier(key, size) returns in every one of `size` members once all have
///     called it with that key; a key serves one barrier.
/// Keys are 1 to 200 characters; any bytes are values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/base/deadline.hpp"
#include "weft/base/detail/fd.hpp"

namespace weft {

class Store {
public:
    virtual ~Store() = default;

    /// Called about once a second while a watched call waits; it may throw to
    /// end the wait (a Group checks that its ranks still live).
    using Watch = std::function<void()>;

    /// Sets `key` to `value`, replacing what was there.
    virtual void set(std::string_view key, std::span<const std::byte> value) = 0;
    /// The value of `key`, once it exists; TimeoutError at `deadline`.
    virtual std::vector<std::byte> get(std::string_view key, Deadline deadline) = 0;
    /// Several keys, each waited for until the one deadline (gloo's multi-get:
    /// one call where a member needs every other member's key): get_now() of
    /// those still missing, then a get() of the first of them, until none is.
    virtual std::vector<std::vector<std::byte>> get(std::span<const std::string> keys,
                                                    Deadline deadline);
    /// The value of each key there now, nothing where it is absent; never
    /// waits. One request where the store has a batch read (the TCP store's
    /// frame, etcd's range); a get() with a deadline of now of each here.
    virtual std::vector<std::optional<std::vector<std::byte>>>
    get_now(std::span<const std::string> keys);
    /// get() in slices of a second, calling `watch` between them; when
    /// `watch` throws, the key is looked up once more (a member may have set
    /// it and ended since), and the error stands only if it is still absent.
    std::vector<std::byte> get(std::string_view key, Deadline deadline, const Watch& watch);
    /// The multi-get in slices of a second, `watch` between them (as above);
    /// a key once read is not read again.
    std::vector<std::vector<std::byte>> get(std::span<const std::string> keys, Deadline deadline,
                                            const Watch& watch);
    /// Sets `key` for as long as this member lives, where the store can tell
    /// (the TCP store erases it when the member's connection closes); a
    /// plain set() elsewhere. Groups mark their live ranks with it.
    virtual void set_while_alive(std::string_view key, std::span<const std::byte> value)
    {
        set(key, value);
    }
    /// Whether the member that set `key` with set_while_alive() still lives:
    /// here, whether the key is there (the TCP store and etcd drop it with
    /// the member); a store that can ask its launcher (PMIx) asks it.
    virtual bool live(std::string_view key) { return contains(key); }
    /// live() of each key (a group's check of all its ranks: etcd answers it
    /// with one range read).
    virtual std::vector<bool> live_each(std::span<const std::string> keys);
    /// Adds `delta` to the integer at `key` (0 when absent), atomically, and
    /// returns the sum.
    virtual std::int64_t add(std::string_view key, std::int64_t delta) = 0;
    /// True when `key` exists now.
    virtual bool contains(std::string_view key) = 0;
    /// contains() of each key (etcd: one range read).
    virtual std::vector<bool> contains_each(std::span<const std::string> keys);
    /// Removes `key`; false when it was not there.
    virtual bool erase(std::string_view key) = 0;
    /// Returns once `size` members have called it with `key`; TimeoutError at
    /// `deadline`, saying how many had arrived. This one counts with add() on
    /// `key`/arrived and opens `key`/open; a store with a collective of its own
    /// (a PMIx fence) may use that instead.
    virtual void barrier(std::string_view key, std::size_t size, Deadline deadline,
                         const Watch& watch);
    void barrier(std::string_view key, std::size_t size, Deadline deadline)
    {
        barrier(key, size, deadline, {});
    }
    /// barrier() of the members `ranks` (their ranks in the group that first
    /// joined, ascending): a store whose collective names its members (a
    /// PMIx fence over those processes) uses them; the others count.
    virtual void barrier_among(std::string_view key, std::span<const std::uint32_t> ranks,
                               Deadline deadline, const Watch& watch)
    {
        barrier(key, ranks.size(), deadline, watch);
    }
    /// Which store this is, for reports ("in-process store", "file store in /dir").
    virtual std::string describe() const = 0;

    /// A key's value as text and back, for the common case.
    void set(std::string_view key, std::string_view text)
    {
        set(key, std::as_bytes(std::span(text.data(), text.size())));
    }
    std::string get_text(std::string_view key, Deadline deadline);
    void set_while_alive(std::string_view key, std::string_view text)
    {
        set_while_alive(key, std::as_bytes(std::span(text.data(), text.size())));
    }

protected:
    /// UsageError unless 1 <= size <= 200.
    static void check_key(std::string_view call, std::string_view key);
    /// The UsageError of add() on a key that holds no decimal integer.
    [[noreturn]] void not_a_count(std::string_view key) const;
    /// The TimeoutError of a get that waited in vain.
    [[noreturn]] void timeout(std::string_view key) const;

private:
    /// The multi-get; with a `watch`, in slices of a second.
    std::vector<std::vector<std::byte>> gather(std::span<const std::string> keys,
                                               Deadline deadline, const Watch& watch);
};

/// Members are threads of one process, sharing one MemoryStore (the tests'
/// store, and a group of one).
class MemoryStore final : public Store {
public:
    using Store::barrier;
    using Store::get;
    using Store::set;
    void set(std::string_view key, std::span<const std::byte> value) override;
    std::vector<std::byte> get(std::string_view key, Deadline deadline) override;
    std::int64_t add(std::string_view key, std::int64_t delta) override;
    bool contains(std::string_view key) override;
    bool erase(std::string_view key) override;
    std::string describe() const override { return "in-process store"; }

private:
    std::mutex m_;
    std::condition_variable changed_;
    std::map<std::string, std::vector<std::byte>, std::less<>> kv_;
};

/// Members share a directory (one host, or a shared file system): a key is a
/// file, written whole and renamed into place, so a reader never sees half of
/// it; add() holds an flock on the key's lock file. set_while_alive() holds
/// an flock on the key's ".live" file for as long as this store lives (the
/// kernel drops it with the process, however it ends), and live() tries it.
class FileStore final : public Store {
public:
    /// Creates `dir` when it does not exist.
    explicit FileStore(std::string dir);
    ~FileStore() override; // this member's live keys are no longer live
    FileStore(const FileStore&) = delete;
    FileStore& operator=(const FileStore&) = delete;
    using Store::barrier;
    using Store::get;
    using Store::set;
    using Store::set_while_alive;
    void set(std::string_view key, std::span<const std::byte> value) override;
    /// UsageError when another live member holds `key`.
    void set_while_alive(std::string_view key, std::span<const std::byte> value) override;
    bool live(std::string_view key) override;
    std::vector<std::byte> get(std::string_view key, Deadline deadline) override;
    std::int64_t add(std::string_view key, std::int64_t delta) override;
    bool contains(std::string_view key) override;
    bool erase(std::string_view key) override;
    std::string describe() const override { return "file store in " + dir_; }

private:
    std::string path(std::string_view call, std::string_view key) const;
    void write_whole(const std::string& path, std::span<const std::byte> value);

    std::string dir_;
    std::mutex live_m_;
    std::map<std::string, detail::Fd, std::less<>> live_; // key -> its ".live" file, locked
};

} // namespace weft
