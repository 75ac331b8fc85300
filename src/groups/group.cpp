// SPDX-License-Identifier: MIT
// Group: joining through a Store (the keys below), the rank <-> peer maps,
// topologies, all_gather and barrier.
//
//   <name>/choice     rank 0's Selection::report()
//   <name>/token      16 random bytes: the credential a member's Node admits
//   <name>/node/<r>   rank r's NodeAddress
//   <name>/joined     the join's barrier
//   <name>/alive/<r>  rank r lives (set_while_alive)
//   <name>/gather/<n>/<r>, <name>/barrier/<n>: the n-th all_gather, barrier
//   <name>/shrink/<k>/here/<r>, .../members/<r>: the k-th shrink; its group's
//                     keys are under <name>/shrink/<k>/
// <r> is always a rank's number in the group first joined (origin()), so a
// key's owner stays one process (PMIx reads a key from its owner).
#include "weft/groups/group.hpp"

#include <algorithm>
#include <array>

#include <rdma/fi_errno.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "random.hpp"
#include "waits.hpp"
#include "weft/base/error.hpp"

namespace weft {

std::string_view to_string(Topology t) noexcept
{
    switch (t) {
    case Topology::mesh: return "mesh";
    case Topology::star: return "star";
    case Topology::ring: return "ring";
    }
    return "?";
}

namespace {

using Token = std::array<std::byte, 16>;

} // namespace

std::string Group::key(std::string_view what) const { return fmt::format("{}/{}", name_, what); }

std::string Group::key(std::string_view what, std::uint64_t n) const
{
    return fmt::format("{}/{}/{}", name_, what, n);
}

Group Group::join(std::shared_ptr<Store> store, std::uint32_t rank, std::uint32_t size,
                  const Options& options, Deadline deadline, std::string name)
{
    if (!store)
        throw UsageError("Group::join", -FI_EINVAL, "", "no store: pass the Store every rank uses");
    if (size == 0 || rank >= size)
        throw UsageError("Group::join", -FI_EINVAL, "",
                         fmt::format("rank {} of a group of {}: ranks run from 0 to size - 1",
                                     rank, size));
    Group g;
    g.store_ = std::move(store);
    g.rank_ = rank;
    g.size_ = size;
    g.name_ = std::move(name);
    g.base_ = g.name_;
    g.origin_.resize(size);
    for (std::uint32_t r = 0; r < size; ++r)
        g.origin_[r] = r;
    Store& s = *g.store_;

    // Rank 0 chooses; the others follow its Node's provider and kind.
    Token token{};
    if (rank == 0) {
        g.node_ = Node::open(options);
        g.choice_ = g.node_->selection().report();
        detail::random_bytes(token, "a group's token");
        s.set(g.key("choice"), g.choice_);
        s.set(g.key("token"), token);
    } else {
        // Rank 0's three keys in one multi-get (one request on the TCP store
        // and etcd, where three gets in a row were three).
        const std::string first_keys[] = {g.key("token"), g.key("choice"), g.key("node", 0)};
        const auto got = s.get(first_keys, deadline);
        const auto& t = got[0];
        if (t.size() != token.size())
            throw Error("Group::join", -EPROTO, "",
                        fmt::format("the group token in the {} has {} B, not {}: another program "
                                    "uses the key '{}'",
                                    s.describe(), t.size(), token.size(), g.key("token")));
        std::copy(t.begin(), t.end(), token.begin());
        g.choice_.assign(reinterpret_cast<const char*>(got[1].data()), got[1].size());
        const NodeAddress first = NodeAddress::decode(got[2]);
        try {
            g.node_ = Node::open_like(options, first);
        } catch (const Error& e) {
            throw Error("Group::join", e.code(), std::string(first.provider()),
                        fmt::format("rank 0 chose {} ({}), and rank {} cannot open it: {}",
                                    first.provider(), to_string(first.kind()), rank, e.what()));
        }
    }
    // Marked live for as long as this process lives, where the store can
    // tell (the TCP store drops the key with the process's connection).
    s.set_while_alive(g.key("alive", rank), std::string_view("1"));
    // Only members (who read the token from the store) may connect.
    g.node_->admit([token](std::uint64_t, std::span<const std::byte> credential) {
        return std::ranges::equal(credential, token);
    });
    s.set(g.key("node", rank), g.node_->address().encode());

    const auto addresses = g.gather("node", rank, deadline);
    g.peers_.resize(size);
    for (std::uint32_t r = 0; r < size; ++r) {
        if (r == rank)
            continue;
        const PeerId p = g.node_->add_peer(NodeAddress::decode(addresses[r]), token);
        g.peers_[r] = p;
        if (g.rank_of_.size() <= p.index)
            g.rank_of_.resize(p.index + 1, size);
        g.rank_of_[p.index] = r;
    }
    // Everyone has added everyone: traffic may start (an RDM message from a
    // rank not yet in the address vector would name no peer).
    try {
        g.meet(g.key("joined"), deadline);
    } catch (const TimeoutError& e) {
        throw TimeoutError("Group::join", -FI_ETIMEDOUT, "",
                           fmt::format("rank {} of {}: not every rank joined in time ({})", rank,
                                       size, e.what()));
    }
    return g;
}

std::vector<std::vector<std::byte>> Group::gather(std::string_view what,
                                                  std::optional<std::uint32_t> skip,
                                                  Deadline deadline)
{
    std::vector<std::string> keys;
    for (std::uint32_t r = 0; r < size_; ++r)
        if (r != skip)
            keys.push_back(fmt::format("{}/{}/{}", name_, what, origin_[r]));
    std::vector<std::vector<std::byte>> got;
    try {
        got = store_->get(keys, deadline, watch());
    } catch (const TimeoutError&) {
        std::vector<std::uint32_t> missing;
        for (std::uint32_t r = 0; r < size_; ++r)
            if (r != skip && !store_->contains(fmt::format("{}/{}/{}", name_, what, origin_[r])))
                missing.push_back(r);
        throw TimeoutError("Group", -FI_ETIMEDOUT, "",
                           fmt::format("rank {} of {}: rank(s) {} did not publish '{}' in time in "
                                       "the {}: did they start, and with the same size and name?",
                                       rank_, size_, fmt::join(missing, ", "),
                                       fmt::format("{}/{}", name_, what), store_->describe()));
    }
    if (skip)
        got.insert(got.begin() + *skip, std::vector<std::byte>{});
    return got;
}

PeerId Group::peer(std::uint32_t r) const
{
    if (r >= size_ || r == rank_)
        throw UsageError("Group::peer", -FI_EINVAL, "",
                         r == rank_ ? fmt::format("rank {} is this rank: it has no peer of itself", r)
                                    : fmt::format("rank {} of a group of {}: ranks run from 0 to {}",
                                                  r, size_, size_ - 1));
    return peers_[r];
}

std::optional<std::uint32_t> Group::rank_of(PeerId peer) const
{
    if (!peer || peer.index >= rank_of_.size() || rank_of_[peer.index] >= size_)
        return std::nullopt;
    return rank_of_[peer.index];
}

std::vector<std::uint32_t> Group::neighbours(Topology t) const
{
    std::vector<std::uint32_t> out;
    switch (t) {
    case Topology::mesh:
        for (std::uint32_t r = 0; r < size_; ++r)
            if (r != rank_)
                out.push_back(r);
        break;
    case Topology::star:
        if (rank_ == 0)
            for (std::uint32_t r = 1; r < size_; ++r)
                out.push_back(r);
        else
            out.push_back(0);
        break;
    case Topology::ring:
        if (size_ > 1) {
            out.push_back((rank_ + 1) % size_);
            out.push_back((rank_ + size_ - 1) % size_);
        }
        break;
    }
    std::ranges::sort(out);
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

void Group::connect(Topology t, Deadline deadline)
{
    std::vector<PeerId> to;
    for (const std::uint32_t r : neighbours(t))
        to.push_back(peers_[r]);
    node_->connect(to, deadline);
}

std::vector<RemoteRegion> Group::all_gather(const RemoteRegion& mine, Deadline deadline)
{
    const std::uint64_t n = gathers_++;
    const std::string what = fmt::format("gather/{}", n);
    const auto wire = mine.encode();
    store_->set(fmt::format("{}/{}/{}", name_, what, origin_[rank_]), std::span<const std::byte>(wire));
    auto got = gather(what, rank_, deadline);
    std::vector<RemoteRegion> out;
    out.reserve(size_);
    for (std::uint32_t r = 0; r < size_; ++r)
        out.push_back(r == rank_ ? mine : RemoteRegion::decode(got[r]));
    return out;
}

void Group::barrier(Deadline deadline) { meet(key("barrier", barriers_++), deadline); }

void Group::meet(const std::string& k, Deadline deadline)
{
    try {
        store_->barrier_among(k, origin_, deadline, watch());
    } catch (const Error& e) {
        if (!e.peer_lost())
            throw;
        // The store saw a member end but did not say which (a PMIx fence's
        // partial success): the live marks do, once the launcher has noted
        // the end, some milliseconds later ("group: one of 8 ranks killed
        // under mpirun --enable-recovery").
        const Store::Watch check = watch();
        const Deadline until(std::min(deadline.when(), Clock::now() + std::chrono::seconds(5)));
        (void)detail::nap_until(until, [&] { check(); return false; }, // throws naming them
                                std::chrono::milliseconds(20));
        throw;
    }
}

std::uint32_t Group::origin(std::uint32_t r) const
{
    if (r >= size_)
        throw UsageError("Group::origin", -FI_EINVAL, "",
                         fmt::format("rank {} of a group of {}", r, size_));
    return origin_[r];
}

std::string Group::describe() const
{
    return fmt::format("rank {} of {} on {} ({}) through the {}", rank_, size_, node_->provider(),
                       to_string(node_->kind()), store_->describe());
}

} // namespace weft
