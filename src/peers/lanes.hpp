// SPDX-License-Identifier: MIT
// A Node's same-host lane (Options::same_host, docs/same-host-lane.md): its
// listener, a lane::Pair with each co-located peer, the regions it offers
// them, and what arrives on the pairs' rings, read with the Node's queue.
//
// Who connects: add_peer() connects to a peer whose address proves it on
// this host, and sends this side's hello and offers at once; the peer accepts
// when it next calls into its Node. Both may connect to each other: then two
// pairs join them, each side sends on the first that was ready for it (never
// switching), and receives on both. A peer that connected but was never
// added gets a PeerId of its own (Node::peer_for).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pair.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/base/error.hpp"
#include "unix_channel.hpp"
#include "weft/fabric/completions.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/info/options.hpp"
#include "weft/peers/node_address.hpp"

namespace weft::detail {

/// How long a Node's first use of a co-located peer waits for its lane hello.
inline constexpr auto lane_patience = std::chrono::seconds(2);
/// read_ranges() on the lane where the provider has no say (MSG, not connected).
inline constexpr std::size_t lane_read_ranges_limit = 64;

/// Why a Node with its lane on cannot take the lane to the Node at `theirs`
/// (no same-host part, another host or namespaces); empty: it can try.
std::string lane_refusal(const NodeAddress& theirs);

class Lanes final : public RegionWatcher, public SideSource {
public:
    /// The PeerId of a co-located peer known by its instance (made if new);
    /// none when the Node does not take it (its gate), or not yet.
    using PeerFor = std::function<PeerId(std::uint64_t instance)>;

    /// Listens, and becomes `domain`'s region watcher and `q`'s side source.
    /// `epoll_fd`: the sleeping Node's set, which the lane's descriptors join
    /// (-1: the Node spins). `max_message`: the largest message a peer sends.
    Lanes(std::uint64_t instance, SameHost mode, std::shared_ptr<Domain> domain, Completions& q,
          int epoll_fd, std::size_t max_message, PeerFor peer_for);
    ~Lanes();
    Lanes(const Lanes&) = delete;
    Lanes& operator=(const Lanes&) = delete;

    /// What this Node's address says of its lane.
    NodeAddress::SameHost address() const;
    SameHost mode() const noexcept { return mode_; }

    /// add_peer: begins the lane to `peer` when its address proves it on this
    /// host; otherwise records why not (path()).
    void begin(PeerId peer, const NodeAddress& theirs);
    /// The pair that carries this side's operations to `peer`, chosen once:
    /// a pair whose hello came, waiting up to `patience` for one begun. None
    /// when the peer has no lane (path() says why).
    lane::Pair* sender(PeerId peer, Deadline patience);
    /// Whether sender() has chosen for `peer` (the Node's fast path waits for it).
    bool decided(PeerId peer) const;
    /// Which path carries this side's operations to `peer`, and why.
    std::string path(PeerId peer) const;
    /// Before this side first posts to `peer` through libfabric (its route is
    /// libfabric's, or a region the lane does not reach, or the Endpoint
    /// escape hatch): says so on every pair with it (Pair::say_fabric).
    void fabric_used(PeerId peer);
    /// Whether everything `peer` sends this side comes on the lane: a pair
    /// whose hello came, and the peer never said it uses libfabric too. Then
    /// a sleeping Node need not look at a provider queue without a descriptor.
    bool lane_only(PeerId peer) const noexcept;
    /// Whether the provider's queue can bring nothing now: no operation of
    /// this side's flies on it, and every live peer is lane_only(). A sleeping
    /// Node on a queue without a descriptor (shm) then sleeps on the lane
    /// alone; otherwise it looks at the queue every 10 ms.
    bool queue_quiet() const noexcept;
    /// Before a sleep on the Node's descriptor (Node::trywait): where the
    /// queue has none and is not quiet, a timer in the set wakes the sleeper
    /// in 10 ms, an event loop on Node::fd() too.
    void before_sleep() noexcept;

    /// Accepts connections, finishes hellos, reads control messages (at most
    /// every 100 us unless `now`). Returns the peers whose channel closed or
    /// who broke the lane's protocol, with why (the Node loses them).
    std::vector<std::pair<PeerId, std::string>> tend(bool now = false);
    /// Whether an operation should tend() first: every 32nd, or when pull()
    /// found a broken peer. A count, not a clock read per operation; waits
    /// tend by the clock (Node::idle).
    bool due() noexcept
    {
        if (count_if_not_due()) [[likely]]
            return false;
        ++operations_;
        return true;
    }
    /// due() for an operation that takes the fast path: false when due()
    /// would be true, and then not counted (the slow path's due() counts it).
    bool count_if_not_due() noexcept
    {
        if (((operations_ + 1) & 31) == 0 || !broken_.empty()) [[unlikely]]
            return false;
        ++operations_;
        return true;
    }
    /// The peer was removed or lost: its pairs close.
    void forget(PeerId peer) noexcept;
    /// An operation the peer's side refused (its key, bounds, access): its
    /// failed completion, thrown by the next poll or wait as libfabric's are.
    void fail(Error e) { failed_.push_back(std::move(e)); }

    // RegionWatcher: offers every region with remote access to every peer.
    void registered(MemoryRegion& region) override;
    void revoking(MemoryRegion& region, bool destroying) noexcept override;
    // SideSource: notifications and messages from every pair.
    std::size_t pull(std::span<Completion> out) override;
    void release(std::uint32_t index) noexcept override;
    bool quiet() noexcept override;

private:
    struct Link {
        std::vector<std::unique_ptr<lane::Pair>> pairs; // every pair with this peer
        lane::Pair* own = nullptr;    // the one this side connected (may await its hello)
        lane::Pair* sending = nullptr; // chosen by sender()
        bool decided = false;
        bool fabric_said = false; // fabric_used(): every pair says so, those to come too
        bool gone = false;        // forget(): removed or lost
        std::string why; // no lane: why not
    };
    struct Buffer {
        std::vector<std::byte> bytes;
        detail::Tag tag;
    };
    Link& link(PeerId peer);
    void offer_all(lane::Pair& pair);
    void offer(lane::Pair& pair, const MemoryRegion& region);
    /// An accepted pair whose hello came: taken when the Node knows or admits
    /// the peer (then this side's hello and offers go), else false (kept).
    bool adopt(std::unique_ptr<lane::Pair>& pair);
    void watch_fds(const lane::Pair& pair, bool add) noexcept;
    std::uint32_t free_buffer();
    /// The next record of `p`'s inbox as `peer`'s completion in `c`; false when
    /// none is whole, or the peer broke the protocol (then in broken_).
    bool take(lane::Pair& p, PeerId peer, Completion& c);

    std::uint64_t instance_;
    SameHost mode_;
    std::shared_ptr<Domain> domain_;
    Completions& q_;
    int epoll_fd_;
    std::size_t max_message_;
    PeerFor peer_for_;
    NodeAddress::SameHost address_;
    lane::UnixListener listener_;
    std::vector<Link> links_;                              // by PeerId index
    struct Unmatched {
        std::unique_ptr<lane::Pair> pair;
        Clock::time_point hello_by; // dropped, silent, after this
    };
    std::vector<Unmatched> unmatched_; // accepted, hello not yet come (or not admitted yet)
    std::unordered_map<std::uint64_t, const MemoryRegion*> regions_; // offered, by key
    std::vector<std::unique_ptr<Buffer>> buffers_;          // messages lent out
    std::vector<std::uint32_t> free_buffers_;
    std::size_t next_ = 0;                                  // pull's round-robin start
    bool armed_ = false;
    std::vector<std::pair<PeerId, std::string>> broken_; // pull() found a peer out of protocol
    std::vector<Error> failed_;                          // fail(): thrown by pull(), oldest first
    std::deque<Completion> leftover_;                    // forget(): a lost peer's last records
    Fd timer_; // before_sleep(): a queue without a descriptor, looked at every 10 ms
    Clock::time_point next_tend_{};
    std::uint32_t operations_ = 0; // due()
};

} // namespace weft::detail
