// SPDX-License-Identifier: MIT
/// @brief `size` ranks over one Node each, joined through a Store.
///
///     auto store = std::make_shared<weft::TcpStore>("10.0.0.1:29500", deadline);
///     weft::Group g = weft::Group::join(store, rank, size, options, deadline);
///     g.connect(weft::Topology::ring, deadline);      // eager; else on first use
///     auto regions = g.all_gather(mr->remote(), deadline);
///     g.node().write_notify(g.peer(right), src, regions[right], 0, seq, &ctx);
///
/// Rank 0 chooses the provider and publishes its choice with its reasons
/// (choice()); the others open their Node on the same provider and endpoint
/// kind, and fail saying so where they cannot. Each rank publishes one key
/// (its Node's address) and reads the others' in one multi-get (gloo's
/// scheme: store load grows with N, not N^2); join() returns once every rank
/// has added every other, so traffic may start at once. No rank waits for
/// rank-1 first: a ring or mesh connects all its links in parallel.
///
/// Only members reach each other's Nodes: rank 0 publishes a random token in
/// the store, and a Node admits connections that present it (MSG). The store
/// is the group's trust anchor: give the TCP store a shared secret
/// (WEFT_SECRET) where strangers share the network.
///
/// Keys live under `name`/ (default "weft"): a store holds one group of a
/// name at a time. Collective calls (all_gather, barrier) are made by every
/// rank in the same order. Threading: as the Node's (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/peers/node.hpp"
#include "weft/info/options.hpp"
#include "weft/fabric/remote_region.hpp"
#include "weft/stores/store.hpp"

namespace weft {

enum class Topology : std::uint8_t {
    mesh, ///< every rank with every other
    star, ///< rank 0 with every other
    ring, ///< rank r with r-1 and r+1 (mod size)
};
std::string_view to_string(Topology t) noexcept;

class Group {
public:
    /// Joins as `rank` of `size` (every member passes the same size and
    /// name); returns when all have joined, or throws TimeoutError at
    /// `deadline` naming the ranks that did not.
    static Group join(std::shared_ptr<Store> store, std::uint32_t rank, std::uint32_t size,
                      const Options& options, Deadline deadline, std::string name = "weft");

    /// The group this process was launched into, found in its environment:
    ///   - PMIX_RANK (mpirun, srun --mpi=pmix): the PMIx store, rank and size
    ///     as the launcher gave them;
    ///   - WEFT_ETCD=host:port, WEFT_JOB, WEFT_RANK, WEFT_SIZE: the etcd store
    ///     there, the job's keys under weft-job/<WEFT_JOB>/; a rank's live
    ///     mark is under its lease, so a rank that dies is seen within its TTL
    ///     (WEFT_ETCD_TTL seconds, default 2; raise it where a loaded machine
    ///     delays the lease's keep-alive, or live ranks are taken for dead);
    ///   - WEFT_STORE=/a/directory, WEFT_RANK, WEFT_SIZE: a file store in
    ///     that directory (one host, or a shared file system); use a fresh
    ///     directory per job;
    ///   - WEFT_STORE=host:port, WEFT_RANK, WEFT_SIZE: the TCP store there;
    ///     rank 0 serves it when it can listen there (else a `weft store
    ///     --listen` does) and, at its end, waits up to 10 s for the others
    ///     to leave it;
    ///   - none of these: a group of one.
    /// launch() says which, and why.
    static Group from_environment(const Options& options, Deadline deadline);
    /// How from_environment() found this group ("WEFT_STORE=10.0.0.1:29500 ...").
    const std::string& launch() const noexcept { return launch_; }

    std::uint32_t rank() const noexcept { return rank_; }
    std::uint32_t size() const noexcept { return size_; }
    Node& node() const noexcept { return *node_; }
    const std::shared_ptr<Node>& node_ptr() const noexcept { return node_; }
    Store& store() const noexcept { return *store_; }
    /// Rank 0's Selection::report(): the provider every rank uses, and why.
    const std::string& choice() const noexcept { return choice_; }

    /// The Node peer of rank `r` (UsageError for this rank or one out of range).
    PeerId peer(std::uint32_t r) const;
    /// The rank of a Node peer (a Completion's `peer`), if it is a member.
    std::optional<std::uint32_t> rank_of(PeerId peer) const;
    /// The ranks this rank talks to in `t`, ascending, without itself.
    std::vector<std::uint32_t> neighbours(Topology t) const;

    /// Connects to this rank's neighbours in `t` now, all at once (MSG; on
    /// RDM the provider connects on first use).
    void connect(Topology t, Deadline deadline);
    /// Every rank's region, indexed by rank (this rank's own included).
    std::vector<RemoteRegion> all_gather(const RemoteRegion& mine, Deadline deadline);
    /// Returns once every rank has called it (the n-th call of each).
    void barrier(Deadline deadline);
    /// Ranks that joined and have ended since, where the store can tell (the
    /// TCP store: the process's connection to it closed). Waits in join,
    /// all_gather and barrier check this every second and end with an Error
    /// (peer_lost()) naming them, instead of waiting for the deadline.
    std::vector<std::uint32_t> departed() const;

    /// The group of the ranks still here (ULFM's MPI_Comm_shrink, over the
    /// store): after a rank left (an Error with peer_lost() from a wait, or
    /// a lost peer on the Node), every survivor calls it; it returns once
    /// each rank of this group has either called it or is seen departed
    /// (under mpirun, start the job with --enable-recovery),
    /// with the survivors renumbered in their old order, on the same Node,
    /// peers and memory. The lowest survivor's view is the one all take, so
    /// every survivor gets the same group. A rank that leaves during the
    /// shrink ends it with Error(peer_lost) naming it: call shrink again.
    /// Each rank's rank in the group it first joined: origin(rank()).
    /// Needs a store that sees departures (TCP store, etcd, PMIx); a rank
    /// that is merely slow is waited for until `deadline` (TimeoutError
    /// naming it).
    Group shrink(Deadline deadline);
    /// The rank `r` of this group had in the group first joined.
    std::uint32_t origin(std::uint32_t r) const;

    /// "rank 3 of 8 on tcp;ofi_rxm (RDM) through the TCP store at host:port".
    std::string describe() const;

private:
    Group() = default;
    std::string key(std::string_view what) const;
    std::string key(std::string_view what, std::uint64_t n) const;
    /// Reads every rank's `what`/<r> (all but `skip`); TimeoutError names the ranks missing.
    std::vector<std::vector<std::byte>> gather(std::string_view what, std::optional<std::uint32_t> skip,
                                               Deadline deadline);
    /// For the store's waits: throws when departed() is not empty.
    Store::Watch watch() const;
    /// The same, for the ranks `of` only.
    Store::Watch watch(std::span<const std::uint32_t> of) const;
    /// The store's barrier of this group's ranks at `key`; an end the store
    /// saw without naming it is named from the live marks.
    void meet(const std::string& key, Deadline deadline);
    /// The ranks of `ranks` (not this one) that joined and whose live mark
    /// is gone.
    std::vector<std::uint32_t> departed_of(std::span<const std::uint32_t> ranks) const;

    std::shared_ptr<void> served_; // from_environment's rank 0: the store's server, kept last
    std::string launch_;
    std::shared_ptr<Store> store_;
    std::shared_ptr<Node> node_;
    std::uint32_t rank_ = 0;
    std::uint32_t size_ = 0;
    std::string name_;                 // this group's keys: gathers, barriers, shrinks
    std::string base_;                 // the first group's: its ranks' node and alive keys
    std::vector<std::uint32_t> origin_; // by rank: the rank in the first group
    std::string choice_;
    std::vector<PeerId> peers_;         // by rank; this rank's is invalid
    std::vector<std::uint32_t> rank_of_; // by PeerId index
    std::uint64_t gathers_ = 0;
    std::uint64_t barriers_ = 0;
    std::uint64_t shrinks_ = 0;
};

} // namespace weft
