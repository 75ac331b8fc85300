// SPDX-License-Identifier: MIT
// Network faults on the tcp path, on a network the test builds itself: a
// network namespace holding the peer, joined to this one by a veth pair
// (10.77.0.1 here, 10.77.0.2 there). No traffic leaves those addresses.
//  - 10 % packet loss and added delay (tc netem): every transfer completes with
//    correct data or fails with a clear error within its deadline;
//  - the link taken down mid-stream: the same, and nothing hangs.
// Needs root (CAP_NET_ADMIN); netem needs the sch_netem module, which this
// host's kernel lacks: that part then says so and runs in the fabric lab.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "support/cases.hpp"
#include "support/peer_process.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"

using namespace weft;
using weft::test::soon;
using namespace std::chrono_literals;

namespace {


/// A namespace and a veth pair of its own (test cases may run in parallel):
/// weft-aN (10.77.N.1) here, weft-bN (10.77.N.2) in namespace weft-faultN.
struct Network {
    std::string ns, a, b, here_ip, there_ip;
    std::optional<std::string> unusable; ///< why it could not be built here

    explicit Network(int id)
        : ns(fmt::format("weft-fault{}", id)), a(fmt::format("weft-a{}", id)),
          b(fmt::format("weft-b{}", id)), here_ip(fmt::format("10.77.{}.1", id)),
          there_ip(fmt::format("10.77.{}.2", id))
    {
        run("ip netns del {}", ns); // a leftover of a killed run
        run("ip link del {}", a);
        if (!(run("ip netns add {}", ns) && run("ip link add {} type veth peer name {}", a, b) &&
              run("ip link set {} netns {}", b, ns) && run("ip addr add {}/24 dev {}", here_ip, a) &&
              run("ip link set {} up", a) &&
              run("ip netns exec {} ip addr add {}/24 dev {}", ns, there_ip, b) &&
              run("ip netns exec {} ip link set {} up", ns, b) &&
              run("ip netns exec {} ip link set lo up", ns)))
            unusable = geteuid() != 0
                           ? "network faults: not root (needs CAP_NET_ADMIN)"
                           : "network faults: ip netns / veth failed (no CAP_NET_ADMIN in this "
                             "container?)";
    }
    ~Network()
    {
        run("ip netns del {}", ns);
        run("ip link del {}", a);
    }
    /// netem on both ends of the link, or false when the kernel has no netem.
    bool netem(const std::string& spec)
    {
        return run("tc qdisc replace dev {} root netem {}", a, spec) &&
               run("ip netns exec {} tc qdisc replace dev {} root netem {}", ns, b, spec);
    }
    void link_down() { run("ip link set {} down", a); }

    /// weft-test-peer serving tcp/MSG inside the namespace, and this side's
    /// connection to it; `exposed` keeps the regions a test exposes, which
    /// outlive the connection.
    struct Link {
        test::PeerProcess peer;
        std::vector<std::shared_ptr<MemoryRegion>> exposed;
        Connection conn;
    };
    Link connect() const
    {
        test::PeerProcess peer("ip", {"netns", "exec", ns, WEFT_TEST_PEER_PATH, "tcp", "msg",
                                      there_ip});
        Options o;
        o.provider = "tcp";
        Connection conn = Connection::connect(fmt::format("{}:{}", there_ip, peer.port()), o,
                                              soon(60s));
        return {std::move(peer), {}, std::move(conn)};
    }

private:
    /// Runs a command line; whether it succeeded.
    template <class... Args>
    static bool run(fmt::format_string<Args...> line, Args&&... args)
    {
        return test::succeeds(fmt::format(line, std::forward<Args>(args)...));
    }
};

struct Outcome {
    int completed = 0, failed = 0;
    std::vector<std::string> errors;
};

/// Verified 64 KiB write + read rounds for `duration`; each wait has `limit`.
/// A round either checks out byte for byte or fails with weft::Error, and
/// nothing blocks past its deadline (checked: no round takes > limit x 2 + 1 s).
Outcome stream(Network::Link& link, std::chrono::seconds duration, std::chrono::seconds limit,
               bool stop_on_error)
{
    Connection& c = link.conn;
    auto& keep = link.exposed;
    constexpr std::size_t n = 65536;
    // All outlive `c`: an operation may still be in flight when an error surfaces.
    auto src = keep.emplace_back(c.allocate(n, Access::local));
    auto sink = keep.emplace_back(c.allocate(n, Access::remote_write));
    auto mine = keep.emplace_back(c.allocate(8u << 20, Access::remote_read_write));
    const RemoteRegion dst = c.exchange(mine->remote(), soon());
    Outcome o;
    const auto until = Clock::now() + duration;
    for (std::uint64_t i = 0; Clock::now() < until; ++i) {
        const auto t0 = Clock::now();
        try {
            test::fill_pattern(src->bytes(), i);
            int ctx = 0;
            c.write(src->slice(0, n), dst, (i % 64) * n, &ctx);
            (void)c.endpoint().wait(&ctx, Deadline::after(limit));
            c.read(sink->slice(0, n), dst, (i % 64) * n, &ctx);
            (void)c.endpoint().wait(&ctx, Deadline::after(limit));
            REQUIRE(std::memcmp(sink->data(), src->data(), n) == 0); // never wrong data
            ++o.completed;
        } catch (const Error& e) {
            ++o.failed;
            o.errors.push_back(e.what());
            if (stop_on_error)
                break;
        }
        REQUIRE(Clock::now() - t0 < 2 * limit + 1s); // no call outlives its deadline
    }
    return o;
}

} // namespace

TEST_CASE("network faults: loss and delay on the tcp path never corrupt or hang", "[faults][net]")
{
    Network net(1);
    WEFT_SKIP_IF(net.unusable);
    if (!net.netem("loss 10% delay 5ms")) {
        WARN("tc netem is not available in this kernel (sch_netem missing): loss and delay run in "
             "the fabric lab guest (scripts/lab/run), whose kernel has it");
        return;
    }
    auto link = net.connect();
    const Outcome out = stream(link, 8s, 20s, false);
    WARN(fmt::format("10% loss + 5 ms delay: {} verified rounds, {} failed with an error",
                     out.completed, out.failed));
    for (const auto& e : out.errors)
        WARN("  " << e);
    CHECK(out.completed > 0); // TCP retransmits: loss slows it down, it still moves
    link.peer.kill_now();
}

TEST_CASE("network faults: the link goes down mid-stream: errors, not hangs", "[faults][net]")
{
    Network net(2);
    WEFT_SKIP_IF(net.unusable);
    auto link = net.connect();
    std::thread cut([&net] {
        std::this_thread::sleep_for(500ms);
        net.link_down();
    });
    // 3 s per wait: a dead link must surface as an error at the latest then.
    const Outcome out = stream(link, 6s, 3s, true);
    cut.join();
    WARN(fmt::format("link down after 0.5 s: {} verified rounds before, then: {}", out.completed,
                     out.errors.empty() ? std::string("(no error)") : out.errors.front()));
    CHECK(out.completed > 0);
    REQUIRE(out.failed == 1); // the stream stopped with an error, within its deadline
    CHECK_FALSE(out.errors.front().empty());
    link.peer.kill_now();
}
