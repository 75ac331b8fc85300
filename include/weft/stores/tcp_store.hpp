// SPDX-License-Identifier: MIT
/// @brief weft's own rendezvous store over TCP, the default that needs no
/// service of its own: a StoreServer (run by rank 0, or by
/// `weft store --listen host:port`) holds the keys, and each member talks to
/// it through a TcpStore.
///
/// The server is one poll loop for all members, on a thread of its own. Both
/// speak the side channel's frames (bootstrap.hpp) with its hello and, when
/// either holds one, its shared-secret check (Options::secret or WEFT_SECRET):
/// a stranger on the port learns that a secret is required, nothing more.
/// A get() that waits is parked at the server, which answers when the key is
/// set or the waiter's deadline passes; nothing polls.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "weft/bootstrap/bootstrap.hpp"
#include "weft/stores/store.hpp"

namespace weft {

class StoreServer {
public:
    /// Listens on host:port (port 0 picks one) and serves until destroyed.
    /// `secret`: empty means WEFT_SECRET if set, else none.
    StoreServer(std::string_view host, std::uint16_t port, std::string_view secret = {});
    ~StoreServer();
    StoreServer(const StoreServer&) = delete;
    StoreServer& operator=(const StoreServer&) = delete;

    std::uint16_t port() const noexcept;
    /// "host:port" for members to connect to (the listening host as given;
    /// 127.0.0.1 when it listens on every interface).
    std::string address() const;
    /// Members connected now (through the hello), and keys held.
    std::size_t members() const;
    std::size_t keys() const;

    struct State;

private:
    std::unique_ptr<State> state_;
};

/// Threads may share one TcpStore: their calls travel on its one connection,
/// each answer goes to its caller, and a get parked at the server holds up
/// nobody else.
class TcpStore final : public Store {
public:
    /// Connects to a StoreServer at "host:port", retrying refused connections
    /// until `deadline` (the server may start after its members).
    TcpStore(std::string_view host_port, Deadline deadline, std::string_view secret = {});
    ~TcpStore() override;

    using Store::barrier;
    using Store::get;
    using Store::set;
    using Store::set_while_alive;
    void set(std::string_view key, std::span<const std::byte> value) override;
    std::vector<std::byte> get(std::string_view key, Deadline deadline) override;
    std::int64_t add(std::string_view key, std::int64_t delta) override;
    /// Erased by the server when this connection closes (the process ended).
    void set_while_alive(std::string_view key, std::span<const std::byte> value) override;
    bool contains(std::string_view key) override;
    /// One request for all the keys (more only for values past ~512 KiB in all).
    std::vector<std::optional<std::vector<std::byte>>>
    get_now(std::span<const std::string> keys) override;
    /// One request for all the keys (the server answers a byte per key).
    std::vector<bool> contains_each(std::span<const std::string> keys) override;
    /// contains_each(): a live key is one whose setter's connection is open.
    std::vector<bool> live_each(std::span<const std::string> keys) override
    {
        return contains_each(keys);
    }
    bool erase(std::string_view key) override;
    std::string describe() const override;

    /// How long a call other than get() waits for the server's answer.
    static constexpr std::chrono::seconds answer_timeout{30};

private:
    struct Request;
    struct Answer;
    Answer call(std::string_view name, std::uint8_t op, std::string_view key,
                std::span<const std::byte> body, Deadline deadline);
    Answer call(std::string_view name, Request r, std::span<const std::byte> body,
                Deadline deadline);

    /// Reads answers until `id`'s is there (one caller at a time reads for all).
    std::vector<std::byte> await(std::unique_lock<std::mutex>& lock, std::uint32_t id,
                                 Deadline answer_by);

    SideChannel channel_;
    std::string server_;
    std::mutex send_m_; // one request at a time on the wire
    std::mutex m_;      // everything below
    std::condition_variable arrived_cv_;
    std::uint32_t next_id_ = 1;
    bool reading_ = false;                                  // a caller reads for all
    std::map<std::uint32_t, std::vector<std::byte>> arrived_; // answers not yet taken
    std::set<std::uint32_t> abandoned_;                     // ids whose caller gave up
    std::string broken_;                                    // why the connection failed
};

} // namespace weft
