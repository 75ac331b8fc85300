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
#include "weft/group.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "random.hpp"
#include "weft/etcd_store.hpp"
#include "weft/pmix_store.hpp"
#include "weft/tcp_store.hpp"
#include "weft/error.hpp"

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
        // the end (measured: some ms later).
        const Store::Watch check = watch();
        const Deadline until(std::min(deadline.when(), Clock::now() + std::chrono::seconds(5)));
        while (!until.expired()) {
            check(); // throws naming them
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        throw;
    }
}

std::vector<std::uint32_t> Group::departed() const
{
    std::vector<std::uint32_t> all(size_);
    for (std::uint32_t r = 0; r < size_; ++r)
        all[r] = r;
    return departed_of(all);
}

std::vector<std::uint32_t> Group::departed_of(std::span<const std::uint32_t> ranks) const
{
    // The node keys first, then the live marks of the ranks that have one:
    // a rank sets its mark before its node key, so one whose node key was
    // there and whose mark is not has ended. (The other order took a rank
    // that joined between the two reads for one that left: measured at 64
    // ranks.) Each read is one call for all ranks: one range read on etcd,
    // where two requests per rank from every rank every second swamped it.
    std::vector<std::string> nodes;
    std::vector<std::uint32_t> of;
    for (const std::uint32_t r : ranks)
        if (r != rank_) {
            nodes.push_back(fmt::format("{}/node/{}", base_, origin_[r]));
            of.push_back(r);
        }
    const std::vector<bool> joined = store_->contains_each(nodes);
    std::vector<std::string> marks;
    std::vector<std::uint32_t> members;
    for (std::size_t i = 0; i < of.size(); ++i)
        if (joined[i]) {
            marks.push_back(fmt::format("{}/alive/{}", base_, origin_[of[i]]));
            members.push_back(of[i]);
        }
    std::vector<std::uint32_t> gone;
    if (marks.empty())
        return gone;
    const std::vector<bool> live = store_->live_each(marks);
    for (std::size_t i = 0; i < members.size(); ++i)
        if (!live[i])
            gone.push_back(members[i]);
    return gone;
}

std::uint32_t Group::origin(std::uint32_t r) const
{
    if (r >= size_)
        throw UsageError("Group::origin", -FI_EINVAL, "",
                         fmt::format("rank {} of a group of {}", r, size_));
    return origin_[r];
}

Group Group::shrink(Deadline deadline)
{
    // <name>/shrink/<k>/here/<r>: rank r is here; .../members/<r>: the
    // survivors as rank r (the lowest) sees them. A "here" key stays, so a
    // rank once seen here is in every view; one that is neither here nor
    // departed is waited for.
    const std::string round = key("shrink", shrinks_++);
    store_->set(fmt::format("{}/here/{}", round, origin_[rank_]), std::string_view("1"));
    std::vector<std::uint32_t> here;
    for (std::uint32_t r = 0; r < size_; ++r) {
        if (r == rank_) {
            here.push_back(r);
            continue;
        }
        const std::uint32_t of[] = {r};
        try {
            (void)store_->get(fmt::format("{}/here/{}", round, origin_[r]), deadline, watch(of));
            here.push_back(r);
        } catch (const TimeoutError&) {
            throw TimeoutError("Group::shrink", -FI_ETIMEDOUT, "",
                               fmt::format("rank {} of {}: rank {} neither came to the shrink nor "
                                           "left the group in time (every survivor calls shrink)",
                                           rank_, size_, r));
        } catch (const Error& e) {
            if (!e.peer_lost())
                throw; // else it has left: not in the smaller group
        }
    }
    const std::uint32_t lowest = here.front();
    const std::string members_key = fmt::format("{}/members/{}", round, origin_[lowest]);
    std::string text = fmt::format("{}", fmt::join(here, ","));
    if (rank_ == lowest) {
        store_->set(members_key, text);
    } else {
        // The lowest survivor's view is the group's; it dies only to be
        // named by the watch.
        const std::uint32_t of[] = {lowest};
        const auto got = store_->get(members_key, deadline, watch(of));
        text.assign(reinterpret_cast<const char*>(got.data()), got.size());
        here.clear();
        for (std::size_t at = 0; at < text.size();) {
            const std::size_t end = std::min(text.find(',', at), text.size());
            std::uint32_t r = 0;
            std::from_chars(text.data() + at, text.data() + end, r);
            here.push_back(r);
            at = end + 1;
        }
        if (std::ranges::find(here, rank_) == here.end())
            throw Error("Group::shrink", -FI_ECONNRESET, std::string(node_->provider()),
                        fmt::format("rank {} of {}: rank {}, the lowest survivor, took this rank "
                                    "for departed (its live mark in the {} was gone): it is out "
                                    "of the smaller group",
                                    rank_, size_, lowest, store_->describe()),
                        nullptr, true);
    }

    Group g;
    g.served_ = served_;
    g.launch_ = launch_;
    g.store_ = store_;
    g.node_ = node_;
    g.size_ = static_cast<std::uint32_t>(here.size());
    g.name_ = round;
    g.base_ = base_;
    g.choice_ = choice_;
    g.peers_.resize(g.size_);
    for (std::uint32_t n = 0; n < g.size_; ++n) {
        const std::uint32_t old = here[n];
        g.origin_.push_back(origin_[old]);
        if (old == rank_) {
            g.rank_ = n;
            continue;
        }
        g.peers_[n] = peers_[old];
        if (g.rank_of_.size() <= peers_[old].index)
            g.rank_of_.resize(peers_[old].index + 1, g.size_);
        g.rank_of_[peers_[old].index] = n;
    }
    // Every survivor has its new group before traffic starts in it.
    g.meet(g.key("joined"), deadline);
    return g;
}

Store::Watch Group::watch(std::span<const std::uint32_t> of) const
{
    std::vector<std::uint32_t> ranks(of.begin(), of.end());
    return [this, ranks] {
        if (const auto gone = departed_of(ranks); !gone.empty())
            throw Error("Group", -FI_ECONNRESET, std::string(node_->provider()),
                        fmt::format("rank {} of {}: rank(s) {} left the group (the {} says "
                                    "the process ended)",
                                    rank_, size_, fmt::join(gone, ", "), store_->describe()),
                        nullptr, true);
    };
}

Store::Watch Group::watch() const
{
    std::vector<std::uint32_t> others;
    for (std::uint32_t r = 0; r < size_; ++r)
        if (r != rank_)
            others.push_back(r);
    return watch(others);
}

namespace {

/// WEFT_RANK / WEFT_SIZE, checked (`store`: the variable that asked for them).
std::uint32_t env_number(const char* name, const char* store)
{
    const char* text = std::getenv(name);
    std::uint32_t v = 0;
    const std::string_view t = text ? text : "";
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (!text || ec != std::errc{} || end != t.data() + t.size())
        throw UsageError("Group::from_environment", -FI_EINVAL, "",
                         fmt::format("the store at {} is named, so {} must be set to a number "
                                     "too (it is {}): {}",
                                     store, name, text ? fmt::format("'{}'", text) : "unset",
                                     std::string_view(name) == "WEFT_ETCD_TTL"
                                         ? "a lease's seconds"
                                         : "set WEFT_RANK and WEFT_SIZE for every process of "
                                           "the group"));
    return v;
}

/// Rank 0's TCP store server: at its end it waits (10 s at most) for the
/// other members to leave, so that their last calls are answered.
struct Served {
    StoreServer server;
    Served(std::string_view host, std::uint16_t port) : server(host, port) {}
    ~Served()
    {
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (server.members() > 0 && Clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
};

} // namespace

Group Group::from_environment(const Options& options, Deadline deadline)
{
    if (PmixStore::launched()) {
        auto store = std::make_shared<PmixStore>();
        const std::uint32_t rank = store->rank();
        const std::uint32_t size = store->size();
        Group g = join(store, rank, size, options, deadline);
        g.launch_ = fmt::format("PMIX_RANK={}: launched by a PMIx launcher (mpirun, srun "
                                "--mpi=pmix): the {}",
                                rank, g.store_->describe());
        return g;
    }
    if (const char* at = std::getenv("WEFT_ETCD"); at && *at) {
        const std::uint32_t rank = env_number("WEFT_RANK", at);
        const std::uint32_t size = env_number("WEFT_SIZE", at);
        const char* job = std::getenv("WEFT_JOB");
        if (!job || !*job)
            throw UsageError("Group::from_environment", -FI_EINVAL, "",
                             fmt::format("WEFT_ETCD={} names an etcd store, which outlives jobs: "
                                         "set WEFT_JOB to a name of this job's own (the same in "
                                         "every rank, e.g. $SLURM_JOB_ID or a UUID), so that no "
                                         "rank reads an earlier job's keys",
                                         at));
        // WEFT_ETCD_TTL: a rank's lease, in seconds (default 2: a death is seen in
        // under 5 s). Loaded machines need more: at 64 ranks on 2 cores, 2 s
        // leases expired under live ranks (measured), each taken for a death.
        std::uint32_t ttl = 2;
        if (const char* t = std::getenv("WEFT_ETCD_TTL"); t && *t)
            ttl = std::max<std::uint32_t>(1, env_number("WEFT_ETCD_TTL", at));
        auto store = std::make_shared<EtcdStore>(at, deadline, fmt::format("weft-job/{}/", job),
                                                 std::chrono::seconds(ttl));
        Group g = join(store, rank, size, options, deadline);
        g.launch_ = fmt::format("WEFT_ETCD={} WEFT_JOB={} WEFT_RANK={} WEFT_SIZE={}: the {}", at,
                                job, rank, size, store->describe());
        return g;
    }
    if (const char* at = std::getenv("WEFT_STORE"); at && *at == '/') {
        const std::uint32_t rank = env_number("WEFT_RANK", at);
        const std::uint32_t size = env_number("WEFT_SIZE", at);
        auto store = std::make_shared<FileStore>(at);
        Group g = join(store, rank, size, options, deadline);
        g.launch_ = fmt::format("WEFT_STORE={} WEFT_RANK={} WEFT_SIZE={}: the {}", at, rank, size,
                                store->describe());
        return g;
    }
    if (const char* at = std::getenv("WEFT_STORE"); at && *at) {
        const std::uint32_t rank = env_number("WEFT_RANK", at);
        const std::uint32_t size = env_number("WEFT_SIZE", at);
        std::shared_ptr<Served> served;
        std::string how;
        if (rank == 0) {
            const auto [host, port] = split_host_port(at);
            try {
                served = std::make_shared<Served>(host, port);
                how = "rank 0 serves it";
            } catch (const Error& e) {
                how = fmt::format("rank 0 could not listen there ({}): a server runs there already",
                                  e.what());
            }
        }
        auto store = std::make_shared<TcpStore>(at, deadline);
        Group g = join(store, rank, size, options, deadline);
        g.launch_ = fmt::format("WEFT_STORE={} WEFT_RANK={} WEFT_SIZE={}: the TCP store{}", at,
                                rank, size, how.empty() ? "" : fmt::format(" ({})", how));
        g.served_ = std::move(served);
        return g;
    }
    Group g = join(std::make_shared<MemoryStore>(), 0, 1, options, deadline);
    g.launch_ = "no launcher found (no WEFT_STORE): a group of one";
    return g;
}

std::string Group::describe() const
{
    return fmt::format("rank {} of {} on {} ({}) through the {}", rank_, size_, node_->provider(),
                       to_string(node_->kind()), store_->describe());
}

} // namespace weft
