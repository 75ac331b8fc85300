// SPDX-License-Identifier: MIT
// Many processes on one target through the same-host lane: eight readers,
// 10^6 reads of one region in all, every byte checked, and every one of their
// notifications delivered (libfabric 1.17's shm takes a region lock per RMA:
// bench/README has what it does with eight).
#include <unistd.h>

#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>

#include "support/cases.hpp"
#include "support/hex.hpp"
#include "support/lane_pattern.hpp"
#include "support/open_fds.hpp"
#include "support/peer_process.hpp"

using namespace weft;
using namespace std::chrono_literals;
using weft::test::hex;
using weft::test::unhex;

TEST_CASE("lane readers: eight processes read one target 10^6 times: every byte right, every "
          "notification delivered",
          "[lane][node][process][many]")
{
    const test::Case c{"shm", EndpointKind::rdm, SameHost::lane};
    WEFT_REQUIRE_CELL(c);
    constexpr int readers = 8;
    constexpr std::uint64_t each = 125000; // 10^6 in all
    constexpr std::uint64_t batch = 1000;  // a notification every 1000 reads
    auto hub = Node::open(test::options_for(c));
    auto target = hub->allocate(64 * 1024, Access::remote_read);
    for (std::size_t i = 0; i < target->size(); ++i)
        target->data()[i] = test::lane_pattern(i);
    auto tally = hub->allocate(readers * 8, Access::remote_write);
    std::memset(tally->data(), 0, tally->size());
    const int fds_before = test::open_fds();
    {
        std::vector<std::optional<test::PeerProcess>> procs(readers);
        std::map<std::uint32_t, int> index_of; // PeerId index -> reader
        for (int k = 0; k < readers; ++k) {
            procs[k].emplace(WEFT_TEST_LANE_PEER,
                             std::vector<std::string>{"shm", "rdm", hex(hub->address().encode()),
                                                      "check", std::to_string(each),
                                                      hex(target->remote().encode()),
                                                      hex(tally->remote().encode()),
                                                      std::to_string(k)});
            std::istringstream line(procs[k]->first_line());
            std::string ready, address;
            line >> ready >> address;
            REQUIRE(ready == "READY");
            index_of[hub->add_peer(NodeAddress::decode(unhex(address))).index] = k;
        }
        // Each reader's notifications, in order: 1000, 2000, ..., each.
        std::vector<std::uint64_t> last(readers, 0);
        std::uint64_t notes = 0;
        const std::uint64_t expected = readers * (each / batch);
        const auto until = Deadline::after(240s);
        while (notes < expected) {
            const Completion n = hub->wait_for(Op::notify, until);
            REQUIRE(index_of.contains(n.peer.index));
            const int k = index_of[n.peer.index];
            INFO("reader " << k << " after " << last[k]);
            REQUIRE(n.data == last[k] + batch);
            last[k] = n.data;
            ++notes;
            std::uint64_t slot = 0;
            std::memcpy(&slot, tally->data() + 8 * k, 8);
            REQUIRE(slot >= n.data); // the data the notification says landed has
        }
        for (int k = 0; k < readers; ++k) {
            REQUIRE(procs[k]->process().wait_until(Clock::now() + 30s));
            const std::string out = procs[k]->process().output();
            INFO("reader " << k << ": " << out);
            CHECK_THAT(out, Catch::Contains("DONE 125000 0 lane=1"));
            CHECK(last[k] == each);
        }
        CHECK(notes == expected);
        // The readers exited: each is lost in turn, nothing of them kept.
        for (const auto& [index, k] : index_of)
            for (const auto end = Deadline::after(5s); !hub->is_lost(PeerId{index}) && !end.expired();)
                (void)hub->poll_one();
        for (const auto& [index, k] : index_of)
            CHECK(hub->is_lost(PeerId{index}));
    }
    CHECK(test::open_fds() == fds_before);
}
