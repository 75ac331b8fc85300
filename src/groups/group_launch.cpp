// SPDX-License-Identifier: MIT
// Group::from_environment: the store the job was launched with (PMIx under
// mpirun or srun, etcd or a TCP store from weft's variables, else a group of
// one), and which one, printed.
#include "weft/groups/group.hpp"

#include <charconv>
#include <chrono>
#include <cstdlib>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "socket.hpp"
#include "waits.hpp"
#include "weft/base/error.hpp"
#include "weft/stores/etcd_store.hpp"
#include "weft/stores/pmix_store.hpp"
#include "weft/stores/tcp_store.hpp"

namespace weft {

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
        (void)detail::nap_until(Deadline::after(std::chrono::seconds(10)),
                                [&] { return server.members() == 0; }, std::chrono::milliseconds(5));
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
        // under 5 s). Loaded machines need more: a lease that expires under a
        // live rank is taken for its death (QUIRKS.md: 64 ranks on 2 cores).
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

} // namespace weft
