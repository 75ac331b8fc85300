// SPDX-License-Identifier: MIT
// What the harness's own files share (harness.hpp is what the tools see).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "harness.hpp"

namespace weft::bench::parts {

bool is_latency(Pattern p);
std::vector<std::size_t> default_sizes(Pattern p);
std::uint64_t default_iterations(Pattern p);
/// The ends of a run on this machine that poll without sleeping: the client,
/// and the server where it answers or counts (a passive target sleeps on the
/// side channel, unless its provider needs it to drive progress).
int busy_ends(Pattern p);
/// Ping-pong patterns count both directions.
int transfers_per_iteration(Pattern p);

/// Warms each end up at `size`, then returns the iteration count of a timed
/// round that fits the budget (the slowest end's pace decides).
std::uint64_t fit_budget(const Config& cfg, std::size_t size, std::initializer_list<End*> ends);
double mb_per_s(const Row& r);
double usec_per_xfer(const Row& r);

/// Writes the plot with gnuplot; false (having said why) when it could not.
bool write_plot(const Config& cfg, const std::string& title, const std::vector<Row>& rows);
/// The gnuplot terminal `--plot FILE` needs (its extension names the format),
/// after checking that gnuplot has it and that FILE's directory exists: at
/// parse time, before a run that may take minutes.
std::string plot_terminal_for(const std::string& path);

/// Forks: the child opens `listeners` side-channel listeners and runs `serve`
/// (the server ends), the parent runs `drive` against them (the client ends,
/// one host:port per listener) and reaps the child. With cfg.pin, the server
/// and the client each run on a CPU of their own (tool::pinned_pair).
int run_forked(const Config& cfg, std::size_t listeners,
               const std::function<void(std::vector<SideListener>&)>& serve,
               const std::function<int(const std::vector<std::string>& host_ports)>& drive);

} // namespace weft::bench::parts
