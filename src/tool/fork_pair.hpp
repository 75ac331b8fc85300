// SPDX-License-Identifier: MIT
// Both ends of a test on this machine: the server end in a child process
// forked before any libfabric call here (forking after verbs initialisation
// is unsafe), the client end in this one (detail::Child, weft's one way to
// start a process). `weft pingpong` and `weft bench` run both ends this way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cpus.hpp"

namespace weft::tool {

/// The child's way to say where it serves: its ports, once it listens.
using Announce = std::function<void(std::span<const std::uint16_t> ports)>;

/// Forks: the child runs `serve` (which announces its ports on `host`), the
/// parent runs `drive` with them as "host:port" and then reaps the child.
/// With `pin`, the client runs on pin->client and the server on pin->server.
/// A child that fails says why, and that is the error (`drive`'s own, or
/// the child never announcing within `timeout`, otherwise). Returns drive's
/// status, or the child's exit status when drive's is 0.
int fork_pair(const std::string& host, std::chrono::milliseconds timeout,
              std::optional<CpuPair> pin, const std::function<void(const Announce&)>& serve,
              const std::function<int(const std::vector<std::string>& host_ports)>& drive);

} // namespace weft::tool
