// SPDX-License-Identifier: MIT
// `--plot FILE`: the sweep as a gnuplot chart.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include <CLI/Error.hpp>

#include "harness_parts.hpp"

namespace weft::bench::parts {
namespace {

/// A size as an axis label: 8, 512, 1K, 1.5K, 64K, 4M, 1G.
std::string axis_label(std::size_t v)
{
    constexpr std::pair<std::size_t, const char*> units[] = {
        {std::size_t{1} << 30, "G"}, {std::size_t{1} << 20, "M"}, {std::size_t{1} << 10, "K"}};
    for (const auto& [unit, name] : units)
        if (v >= unit)
            return fmt::format("{:.3g}{}", static_cast<double>(v) / static_cast<double>(unit), name);
    return std::to_string(v);
}

/// A string inside single quotes in a gnuplot script ('' is a quote).
std::string gp_quote(const std::string& text)
{
    std::string out = "'";
    for (const char c : text)
        out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// The gnuplot script of the plot, the data inline (nothing beside it to clean up).
/// Latency, where each iteration was timed: a line through the medians, with
/// bars from the fastest iteration to p99; else the mean.
std::string gnuplot_script(const std::string& path, const std::string& terminal, Pattern p,
                        const std::string& title, const std::vector<Row>& rows)
{
    const bool vector = terminal == "pdfcairo" || terminal == "epscairo";
    const bool spread = is_latency(p) && !rows.empty() &&
                        std::all_of(rows.begin(), rows.end(),
                                    [](const Row& r) { return r.spread.has_value(); });
    std::ostringstream g;
    g << "set terminal " << terminal << (vector ? " size 9in,5.4in" : " size 900,540") << "\n"
      << "set output " << gp_quote(path) << "\n"
      << "set title " << gp_quote(title) << " noenhanced\n"
      << "set logscale x 2\nset grid\n"
      << (spread ? "set key below height 1\n" : "set key off\n") << "set xlabel 'bytes'\n"
      << "set ylabel '" << (is_latency(p) ? "usec per transfer (one way)" : "MB/s") << "'\n"
      << (is_latency(p) ? "set logscale y 10\n" : "");
    // One tic per size measured, in K/M/G, slanted when there are many.
    g << "set xtics (";
    for (std::size_t i = 0; i < rows.size(); ++i)
        g << (i ? ", " : "") << '"' << axis_label(rows[i].size) << "\" " << rows[i].size;
    g << ")" << (rows.size() > 10 ? " rotate by -45" : "") << "\n";
    // Half an octave beside the first and the last size: autoscaled, the axis
    // ends at the last size, and gnuplot leaves out a tic on the very end of a
    // log axis when log2 of it comes out a hair above the end (16, 64 and 4096
    // among others: "tools: bench --plot draws the median with bars to p99 and
    // labels every size"); with one size there is no range at all.
    if (!rows.empty()) {
        const auto [lo, hi] = std::minmax_element(
            rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.size < b.size; });
        g << fmt::format("set xrange [{:g}:{:g}]\n", static_cast<double>(lo->size) / std::sqrt(2.0),
                         static_cast<double>(hi->size) * std::sqrt(2.0));
    }
    g << "$data << EOD\n";
    if (spread) {
        g << "# bytes median min p99 (usec per transfer)\n";
        for (const auto& r : rows)
            g << r.size << ' ' << r.spread->median << ' ' << r.spread->min << ' ' << r.spread->p99
              << '\n';
        // Bars at the sizes measured rather than a band, which would draw
        // spreads between them too.
        g << "EOD\nplot $data using 1:2:3:4 with yerrorlines lw 2 pt 7 lc rgb '#2848a0' title "
             "'median; bars from min to p99 of single iterations'\n";
    } else {
        g << "# bytes " << (is_latency(p) ? "mean (usec per transfer)" : "MB/s") << "\n";
        for (const auto& r : rows)
            g << r.size << ' ' << (is_latency(p) ? usec_per_xfer(r) : mb_per_s(r)) << '\n';
        g << "EOD\nplot $data using 1:2 with linespoints lw 2 pt 7\n";
    }
    return g.str();
}

} // namespace

bool write_plot(const Config& cfg, const std::string& title, const std::vector<Row>& rows)
{
    const std::string script = gnuplot_script(cfg.plot, cfg.plot_terminal, cfg.pattern, title, rows);
    if (cfg.plot_script) {
        std::ofstream(cfg.plot + ".gp") << script;
    }
    std::error_code ec;
    std::filesystem::remove(cfg.plot, ec); // so that a stale file cannot pass for a new one
    std::FILE* gp = ::popen("gnuplot", "w");
    if (!gp) {
        std::fprintf(stderr, "bench: could not start gnuplot: %s\n", std::strerror(errno));
        return false;
    }
    std::fwrite(script.data(), 1, script.size(), gp);
    const int rc = ::pclose(gp);
    if (rc != 0 || std::filesystem::file_size(cfg.plot, ec) == 0 || ec) {
        std::fprintf(stderr, "bench: gnuplot did not write %s (exit status %d; its message, if "
                             "any, is above)\n",
                     cfg.plot.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
        return false;
    }
    return true;
}

std::string plot_terminal_for(const std::string& path)
{
    namespace fs = std::filesystem;
    const auto fail = [](const std::string& why) { return CLI::ValidationError("--plot", why); };
    std::string ext = fs::path(path).extension().string();
    for (char& c : ext)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // Each format with the terminals that write it, the better first.
    const std::vector<std::pair<std::string, std::vector<std::string>>> formats = {
        {".png", {"pngcairo", "png"}}, {".svg", {"svg"}},   {".pdf", {"pdfcairo", "pdf"}},
        {".jpg", {"jpeg"}},            {".jpeg", {"jpeg"}}, {".gif", {"gif"}},
    };
    const auto known = std::find_if(formats.begin(), formats.end(),
                                    [&](const auto& f) { return f.first == ext; });
    if (known == formats.end())
        throw fail(fmt::format("'{}': {}; the extension names the format: .png, .svg, .pdf, "
                               ".jpg or .gif",
                               path, ext.empty() ? "no extension" : "unknown format '" + ext + "'"));
    const fs::path dir = fs::path(path).parent_path().empty() ? fs::path(".")
                                                              : fs::path(path).parent_path();
    std::error_code ec;
    if (!fs::exists(dir, ec))
        throw fail(fmt::format("'{}': the directory {} does not exist (mkdir -p {})", path,
                               dir.string(), dir.string()));
    if (!fs::is_directory(dir, ec))
        throw fail(fmt::format("'{}': {} is not a directory", path, dir.string()));
    if (::access(dir.c_str(), W_OK) != 0)
        throw fail(fmt::format("'{}': the directory {} is not writable: {}", path, dir.string(),
                               std::strerror(errno)));
    std::string terminals;
    if (std::FILE* f = ::popen("gnuplot -e 'print GPVAL_TERMINALS' 2>&1", "r")) {
        char buf[4096];
        while (const std::size_t n = std::fread(buf, 1, sizeof buf, f))
            terminals.append(buf, n);
        if (::pclose(f) != 0)
            terminals.clear();
    }
    if (terminals.empty())
        throw fail("needs gnuplot, which is not installed (apt-get install gnuplot-nox)");
    std::istringstream words(terminals);
    std::vector<std::string> have{std::istream_iterator<std::string>(words),
                                  std::istream_iterator<std::string>()};
    const auto has = [&](const std::string& t) {
        return std::find(have.begin(), have.end(), t) != have.end();
    };
    for (const auto& t : known->second)
        if (has(t))
            return t;
    std::string can;
    for (const auto& [e, ts] : formats)
        if (std::any_of(ts.begin(), ts.end(), has))
            can += (can.empty() ? "" : ", ") + e;
    throw fail(fmt::format("'{}': this gnuplot cannot write {} (it has no {} terminal); it can "
                           "write {}",
                           path, ext, known->second.front(), can));
}

} // namespace weft::bench::parts
