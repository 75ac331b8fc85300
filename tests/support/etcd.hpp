// SPDX-License-Identifier: MIT
// A local etcd for the tests (Debian etcd-server): started on free loopback
// ports in a fresh data directory, stopped and removed with this object.
#pragma once

#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "eventually.hpp"
#include "process.hpp"
#include "sockets.hpp"
#include "temp_dir.hpp"

namespace weft::test {

class Etcd {
public:
    /// Why etcd cannot run here, or nothing.
    static std::optional<std::string> unavailable()
    {
        if (!succeeds("etcd --version"))
            return "no etcd here (Debian etcd-server; ./weft.sh test installs it)";
        return std::nullopt;
    }

    /// Starts etcd; a start that fails (its port taken by a test beside this
    /// one between the probe and etcd's bind) is tried again on other ports.
    Etcd()
    {
        std::string why;
        for (int attempt = 0; attempt < 3; ++attempt) {
            if (start(attempt, why))
                return;
        }
        throw std::runtime_error(why);
    }
    Etcd(const Etcd&) = delete;
    Etcd& operator=(const Etcd&) = delete;
    ~Etcd()
    {
        if (etcd_)
            etcd_->stop(std::chrono::seconds(30));
    }
    /// "127.0.0.1:port" of its client URL.
    const std::string& endpoint() const noexcept { return endpoint_; }

    /// One etcd for the whole test program, started on first use.
    static Etcd& shared()
    {
        static Etcd e;
        return e;
    }

private:
    bool start(int attempt, std::string& why)
    {
        const std::uint16_t client = free_port();
        const std::uint16_t peer = free_port();
        endpoint_ = fmt::format("127.0.0.1:{}", client);
        const std::string client_url = "http://" + endpoint_;
        const std::string peer_url = fmt::format("http://127.0.0.1:{}", peer);
        etcd_.emplace(Command{{"etcd", "--data-dir", fmt::format("{}/data{}", dir_.path, attempt),
                               "--listen-client-urls", client_url, "--advertise-client-urls",
                               client_url, "--listen-peer-urls", peer_url,
                               "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                               "default=" + peer_url}},
                      "etcd");
        // Ready once its client port takes connections; its log says why not.
        bool exited = false;
        const bool up = eventually(Deadline::after(std::chrono::seconds(30)), [&] {
            if ((exited = etcd_->wait_until(Clock::now())))
                return true;
            try {
                ::close(loopback_connect(client));
                return true;
            } catch (const std::runtime_error&) {
                return false;
            }
        }, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
        if (exited) {
            why = "etcd exited at start; it printed: " + etcd_->output();
            etcd_.reset();
            return false;
        }
        if (!up) {
            why = "etcd did not listen within 30 s; it printed: " + etcd_->output();
            etcd_.reset();
            return false;
        }
        return true;
    }

    TempDir dir_{"weft-etcd"}; // removed after etcd stopped
    std::optional<Process> etcd_;
    std::string endpoint_;
};

} // namespace weft::test
