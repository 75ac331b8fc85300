// SPDX-License-Identifier: MIT
// The child speaks once on a pipe: "P<port>[,<port>...]\n" when it serves,
// "E<why>" when it cannot (until the pipe's end).
#include "fork_pair.hpp"

#include <unistd.h>

#include <stdexcept>

#include <fmt/format.h>

#include "child.hpp"
#include "weft/base/deadline.hpp"

namespace weft::tool {

int fork_pair(const std::string& host, std::chrono::milliseconds timeout,
              std::optional<CpuPair> pin, const std::function<void(const Announce&)>& serve,
              const std::function<int(const std::vector<std::string>& host_ports)>& drive)
{
    // The client's CPU first: the child inherits it, then moves to its own.
    if (pin)
        if (const auto err = pin_to(pin->client); !err.empty())
            throw std::runtime_error(err);
    auto server = detail::Child::fork([&](int to_parent) {
        const auto say = [to_parent](const std::string& msg) {
            (void)!write(to_parent, msg.data(), msg.size());
        };
        try {
            if (pin)
                if (const auto err = pin_to(pin->server); !err.empty())
                    throw std::runtime_error(err);
            serve([&](std::span<const std::uint16_t> ports) {
                std::string msg = "P";
                for (std::size_t i = 0; i < ports.size(); ++i)
                    msg += fmt::format("{}{}", i ? "," : "", ports[i]);
                say(msg + "\n");
            });
            return 0;
        } catch (const std::exception& e) {
            say("E" + std::string(e.what()));
            return 1;
        }
    });
    // The child says either its ports or why it could not serve.
    std::string line = server.read_until('\n', Deadline::after(timeout));
    if (line.size() < 2 || line[0] != 'P' || line.back() != '\n') {
        line += server.read_rest(Deadline::after(timeout));
        if (line.empty())
            server.kill_now();
        server.stop_listening();
        (void)server.finish(Deadline::after(timeout));
        throw std::runtime_error(line.empty() || line[0] != 'E'
                                     ? "the server process did not start in time"
                                     : "server: " + line.substr(1));
    }
    std::vector<std::string> host_ports;
    for (std::size_t pos = 1; pos < line.size() - 1;) {
        const std::size_t end = std::min(line.find(',', pos), line.size() - 1);
        host_ports.push_back(host + ":" + line.substr(pos, end - pos));
        pos = end + 1;
    }
    int status = 0;
    try {
        status = drive(host_ports);
    } catch (...) {
        // The server's explanation, when it has one, is the better one.
        line = server.read_rest(Deadline::after(timeout));
        server.kill_now();
        if (line.size() > 1 && line[0] == 'E')
            throw std::runtime_error("server: " + line.substr(1));
        throw;
    }
    server.stop_listening();
    const int child = server.finish(Deadline::after(timeout));
    return status != 0 ? status : child == 0 ? 0 : 1;
}

} // namespace weft::tool
