// SPDX-License-Identifier: MIT
// A local etcd for the tests (Debian etcd-server): started on free loopback
// ports in a fresh data directory, stopped and removed with this object.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sockets.hpp"
#include "spawn.hpp"
#include "weft/bootstrap.hpp"

namespace weft::test {

class Etcd {
public:
    /// Why etcd cannot run here, or nothing.
    static std::optional<std::string> unavailable()
    {
        if (std::system("etcd --version > /dev/null 2>&1") != 0)
            return "no etcd here (Debian etcd-server; ./weft.sh test installs it)";
        return std::nullopt;
    }

    Etcd()
    {
        std::string tmpl = (std::filesystem::temp_directory_path() / "weft-etcd-XXXXXX").string();
        if (!::mkdtemp(tmpl.data()))
            throw std::runtime_error("mkdtemp");
        dir_ = tmpl;
        const auto free_port = [] {
            const SideListener probe("127.0.0.1", 0);
            return probe.port();
        };
        const std::uint16_t client = free_port();
        const std::uint16_t peer = free_port();
        endpoint_ = fmt::format("127.0.0.1:{}", client);
        const std::string client_url = "http://" + endpoint_;
        const std::string peer_url = fmt::format("http://127.0.0.1:{}", peer);
        etcd_ = spawn({"etcd", "--data-dir", dir_ + "/data", "--listen-client-urls", client_url,
                       "--advertise-client-urls", client_url, "--listen-peer-urls", peer_url,
                       "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                       "default=" + peer_url},
                      {}, "etcd");
        // Ready once its client port takes connections; its log says why not.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        for (;;) {
            int st = 0;
            if (::waitpid(etcd_.pid, &st, WNOHANG) == etcd_.pid) {
                etcd_.pid = -1;
                throw std::runtime_error("etcd exited at start; its log: " + etcd_.log);
            }
            try {
                ::close(loopback_connect(client));
                return;
            } catch (const std::runtime_error&) {
            }
            if (std::chrono::steady_clock::now() > until)
                throw std::runtime_error("etcd did not listen within 30 s");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    Etcd(const Etcd&) = delete;
    Etcd& operator=(const Etcd&) = delete;
    ~Etcd()
    {
        if (etcd_.pid > 0) {
            ::kill(etcd_.pid, SIGTERM);
            int st = 0;
            ::waitpid(etcd_.pid, &st, 0);
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
        std::filesystem::remove(etcd_.log, ec);
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
    Spawned etcd_;
    std::string dir_;
    std::string endpoint_;
};

} // namespace weft::test
