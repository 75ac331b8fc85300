// SPDX-License-Identifier: MIT
// Groups across real interfaces: each rank in a network namespace of its own (a "host"),
// joined to the others by a veth pair through one bridge, so that every byte crosses
// interfaces and the bridge. Star, ring and mesh of 4 and 8 ranks (weft-test-topology),
// every block checked; then one rank's link taken down mid-run: the ranks next to it in
// the topology drop it with an error naming it, and every other rank finishes; and loss
// on one rank's link (tc netem): TCP retransmits, every block still arrives intact.
// Needs root (CAP_NET_ADMIN), as the network faults do; the netem case needs sch_netem, which
// this host's kernel lacks (it says so and skips); the fabric lab's guest has it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/process.hpp"
#include "support/skip.hpp"

using namespace std::chrono_literals;
using weft::test::Command;
using weft::test::Process;

namespace {

/// `n` namespaces weft-topoT-K, each with eth0 at 10.79.T.(K+1) on a veth whose other
/// end (wtTK) is a port of bridge wbrT. Removed with this object.
class Hosts {
public:
    Hosts(int t, std::uint32_t n) : t_(t), n_(n)
    {
        clean();
        bool ok = run("ip link add wbr{} type bridge", t_) && run("ip link set wbr{} up", t_);
        for (std::uint32_t k = 0; ok && k < n_; ++k)
            ok = run("ip netns add {}", ns(k)) &&
                 run("ip link add wt{}{} type veth peer name eth0 netns {}", t_, k, ns(k)) &&
                 run("ip link set wt{}{} master wbr{} up", t_, k, t_) &&
                 run("ip netns exec {} ip addr add {}/24 dev eth0", ns(k), ip(k)) &&
                 run("ip netns exec {} ip link set eth0 up", ns(k)) &&
                 run("ip netns exec {} ip link set lo up", ns(k));
        if (!ok)
            unusable_ = ::geteuid() != 0 ? "topologies: network namespaces need root"
                                          : "topologies: ip netns / veth / bridge failed here";
    }
    ~Hosts() { clean(); }
    const std::optional<std::string>& unusable() const { return unusable_; }

    std::string ns(std::uint32_t k) const { return fmt::format("weft-topo{}-{}", t_, k); }
    std::string ip(std::uint32_t k) const { return fmt::format("10.79.{}.{}", t_, k + 1); }
    /// Rank k's link, taken down on the bridge's side.
    void link_down(std::uint32_t k) const { run("ip link set wt{}{} down", t_, k); }
    /// netem `spec` on both ends of rank k's link; false without sch_netem.
    bool netem(std::uint32_t k, const std::string& spec) const
    {
        return run("tc qdisc replace dev wt{}{} root netem {}", t_, k, spec) &&
               run("ip netns exec {} tc qdisc replace dev eth0 root netem {}", ns(k), spec);
    }
    /// TCP segments rank k's namespace retransmitted (RetransSegs of /proc/net/snmp).
    std::uint64_t retransmitted(std::uint32_t k) const
    {
        const auto got = weft::test::run_shell(fmt::format(
            "ip netns exec {} awk '/^Tcp:/ {{ n++ }} /^Tcp:/ && n == 2 {{ print $13 }}' /proc/net/snmp",
            ns(k)));
        return got.status == 0 ? std::stoull("0" + got.output) : 0;
    }

    /// Rank k of `topology` in its namespace, rank 0 serving the TCP store; over tcp, the
    /// provider whose traffic crosses these interfaces (the fabric lab's RDMA devices are
    /// on its own network, not the bridge's).
    Process rank(std::uint32_t k, const std::string& topology, int rounds,
                 std::chrono::seconds silence) const
    {
        return Process(Command{{"ip", "netns", "exec", ns(k), WEFT_TOPOLOGY_MEMBER_PATH, topology,
                                std::to_string(rounds), std::to_string(silence.count())},
                               {"WEFT_PROVIDER=tcp", fmt::format("WEFT_STORE={}:29600", ip(0)),
                                fmt::format("WEFT_RANK={}", k), fmt::format("WEFT_SIZE={}", n_)}},
                       fmt::format("{}-{}", topology, k));
    }

private:
    template <class... Args>
    static bool run(fmt::format_string<Args...> line, Args&&... args)
    {
        return weft::test::succeeds(fmt::format(line, std::forward<Args>(args)...));
    }
    void clean() const
    {
        for (std::uint32_t k = 0; k < n_; ++k) {
            run("ip netns del {}", ns(k)); // its end of the veth goes with it, and so the pair
            run("ip link del wt{}{}", t_, k);
        }
        run("ip link del wbr{}", t_);
    }

    int t_;
    std::uint32_t n_;
    std::optional<std::string> unusable_;
};

/// The neighbours of rank k of n in `topology`.
std::vector<std::uint32_t> neighbours(const std::string& topology, std::uint32_t k,
                                      std::uint32_t n)
{
    if (topology == "ring")
        return {(k + n - 1) % n, (k + 1) % n};
    std::vector<std::uint32_t> out;
    for (std::uint32_t r = 0; r < n; ++r)
        if (r != k && (topology == "mesh" || k == 0 || r == 0)) // star: rank 0 in the middle
            out.push_back(r);
    return out;
}

/// Runs `topology` over `hosts`' n ranks for `rounds`, checking that each verified every
/// block from each of its neighbours; a neighbour silent for `silence` would be dropped.
void all_verified(const Hosts& hosts, std::uint32_t n, const std::string& topology, int rounds,
                  std::chrono::seconds silence)
{
    std::vector<Process> ranks;
    for (std::uint32_t k = 0; k < n; ++k)
        ranks.push_back(hosts.rank(k, topology, rounds, silence));
    weft::test::finish_all(ranks, 180s);
    for (std::uint32_t k = 0; k < n; ++k) {
        const std::string out = ranks[k].output();
        INFO("rank " << k << " printed:\n" << out);
        CHECK(ranks[k].status() == 0);
        CHECK(out.find(fmt::format("rank {}: {} verified, {} rounds with {} neighbours", k,
                                   topology, rounds, neighbours(topology, k, n).size())) !=
              std::string::npos);
    }
}

} // namespace

TEST_CASE("topologies: star, ring and mesh of 4 and 8 ranks, each in a namespace of its own "
          "behind a bridge, every block checked",
          "[topology][group][process]")
{
    const std::uint32_t n = GENERATE(4u, 8u);
    const std::string topology = GENERATE(as<std::string>{}, "star", "ring", "mesh");
    INFO(n << " ranks, " << topology);
    Hosts hosts(1, n);
    WEFT_SKIP_IF(hosts.unusable());
    all_verified(hosts, n, topology, 30, 5s);
}

TEST_CASE("topologies: loss on one rank's link (netem): TCP retransmits, every block of every "
          "rank still verified, nothing hangs",
          "[topology][group][process][netem]")
{
    const std::string topology = GENERATE(as<std::string>{}, "ring", "mesh");
    INFO(topology);
    constexpr std::uint32_t lossy = 2;
    Hosts hosts(3, 4);
    WEFT_SKIP_IF(hosts.unusable());
    // 3% each way: a segment lost five times running, which TCP's doubling timeout takes
    // 6 s to resend, is rare; lost blocks are waited for 30 s before a neighbour is dropped.
    WEFT_SKIP_IF(hosts.netem(lossy, "loss 3% delay 2ms")
                     ? std::nullopt
                     : std::optional<std::string>("tc netem is not available in this kernel "
                                                  "(sch_netem missing): the fabric lab guest, "
                                                  "whose kernel has it, runs this case"));
    all_verified(hosts, 4, topology, 60, 30s);
    // The loss was real: the lossy rank's TCP sent segments again.
    CHECK(hosts.retransmitted(lossy) > 0);
}

TEST_CASE("topologies: one rank's link taken down mid-run: its neighbours drop it naming it, "
          "every other rank finishes, nothing hangs",
          "[topology][group][process][faults]")
{
    const std::string topology = GENERATE(as<std::string>{}, "star", "ring", "mesh");
    INFO(topology);
    constexpr std::uint32_t cut = 2; // not rank 0: it serves the store
    Hosts hosts(2, 4);
    WEFT_SKIP_IF(hosts.unusable());
    std::vector<Process> ranks;
    for (std::uint32_t k = 0; k < 4; ++k)
        ranks.push_back(hosts.rank(k, topology, 400, 5s)); // 20 ms a round: 8 s
    for (std::uint32_t k = 0; k < 4; ++k)
        REQUIRE(ranks[k].wait_for_output("READY", 60s));
    std::this_thread::sleep_for(500ms);
    hosts.link_down(cut);
    const auto t0 = std::chrono::steady_clock::now();
    weft::test::finish_all(ranks, 120s);
    CHECK(std::chrono::steady_clock::now() - t0 < 60s);
    const auto near = neighbours(topology, cut, 4);
    for (std::uint32_t k = 0; k < 4; ++k) {
        const std::string out = ranks[k].output();
        INFO("rank " << k << " printed:\n" << out);
        if (k == cut) { // alone: every neighbour dropped
            CHECK(ranks[k].status() == 3);
            CHECK(out.find(fmt::format("rank {}: no neighbour left", k)) != std::string::npos);
            continue;
        }
        const bool next_to_cut = std::find(near.begin(), near.end(), k) != near.end();
        CHECK(ranks[k].status() == 0);
        CHECK(out.find(fmt::format("rank {}: {} verified, 400 rounds with {} neighbours", k,
                                   topology, neighbours(topology, k, 4).size() - next_to_cut)) !=
              std::string::npos);
        CHECK((out.find(fmt::format("rank {}: lost neighbour {}: ", k, cut)) != std::string::npos) ==
              next_to_cut);
    }
}
