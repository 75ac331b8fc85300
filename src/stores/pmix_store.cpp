// SPDX-License-Identifier: MIT
#include "weft/stores/pmix_store.hpp"

#include <pmix.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {

namespace {

[[noreturn]] void pmix_fail(std::string_view call, pmix_status_t rc, const std::string& what)
{
    const std::string text = fmt::format("{}: {} ({})", what, PMIx_Error_string(rc), rc);
    if (rc == PMIX_ERR_TIMEOUT)
        throw TimeoutError(std::string(call), -FI_ETIMEDOUT, "", text);
    throw Error(std::string(call), -FI_EOTHER, "", text);
}

/// PMIX_TIMEOUT is whole seconds: at least 1, rounded up.
int timeout_seconds(Deadline deadline)
{
    const auto s = std::chrono::ceil<std::chrono::seconds>(deadline.remaining()).count();
    return static_cast<int>(std::clamp<std::int64_t>(s, 1, 1 << 30));
}

} // namespace

bool PmixStore::launched()
{
    const char* r = std::getenv("PMIX_RANK");
    return r != nullptr && *r != '\0';
}

PmixStore::PmixStore()
{
    if (!launched())
        throw UsageError("PmixStore", -FI_EINVAL, "",
                         "this process was not started by a PMIx launcher (PMIX_RANK is unset): "
                         "run it under `mpirun` or `srun --mpi=pmix`, or use another store");
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    if (const pmix_status_t rc = PMIx_Init(&me, nullptr, 0); rc != PMIX_SUCCESS)
        pmix_fail("PMIx_Init", rc, "cannot reach the launcher's PMIx server");
    nspace_ = me.nspace;
    rank_ = me.rank;
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* v = nullptr;
    if (const pmix_status_t rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &v);
        rc != PMIX_SUCCESS || v == nullptr) {
        PMIx_Finalize(nullptr, 0);
        pmix_fail("PMIx_Get", rc, "the launcher did not say the job's size");
    }
    size_ = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
}

PmixStore::~PmixStore() { PMIx_Finalize(nullptr, 0); }

std::string PmixStore::describe() const
{
    return fmt::format("PMIx store (namespace {}, {} ranks)", nspace_, size_);
}

std::uint32_t PmixStore::owner(std::string_view key) const
{
    const auto slash = key.rfind('/');
    if (slash == std::string_view::npos)
        return 0;
    const std::string_view tail = key.substr(slash + 1);
    std::uint32_t r = 0;
    const auto [end, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), r);
    return ec == std::errc{} && end == tail.data() + tail.size() && r < size_ ? r : 0;
}

void PmixStore::set(std::string_view key, std::span<const std::byte> value)
{
    check_key("Store::set", key);
    if (owner(key) != rank_)
        throw UsageError("Store::set", -FI_EINVAL, "",
                         fmt::format("key '{}' belongs to rank {} in a PMIx store (a number after "
                                     "the last '/' names its rank, else rank 0), and this is rank "
                                     "{}: PMIx reads a key from the process that put it",
                                     key, owner(key), rank_));
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(value.data()));
    v.data.bo.size = value.size();
    const std::string k(key);
    if (const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, k.c_str(), &v); rc != PMIX_SUCCESS)
        pmix_fail("PMIx_Put", rc, fmt::format("key '{}'", key));
    if (const pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS)
        pmix_fail("PMIx_Commit", rc, fmt::format("key '{}'", key));
}

namespace {

/// One PMIx_Get_nb: the callback (PMIx's thread) fills it, the caller waits
/// with its deadline. PMIx_Get itself can block past its PMIX_TIMEOUT (a key
/// of a rank that died gets no answer for minutes), so a wait that ends
/// leaves the request to its callback, which holds its own reference.
struct PendingGet {
    std::mutex m;
    std::condition_variable done_cv;
    bool done = false;
    pmix_status_t rc = PMIX_SUCCESS;
    std::vector<std::byte> value;
    // What the request points at, kept here: PMIx reads them on its own
    // thread, also after a wait that gave up has returned, when the caller's
    // would be gone.
    std::string key;
    pmix_proc_t from;
    pmix_info_t info;
    int seconds = 1;

    static void answer(pmix_status_t rc, pmix_value_t* v, void* hold)
    {
        const std::unique_ptr<std::shared_ptr<PendingGet>> owner(
            static_cast<std::shared_ptr<PendingGet>*>(hold));
        PendingGet& p = **owner;
        const std::lock_guard lock(p.m);
        p.rc = rc;
        if (rc == PMIX_SUCCESS && v != nullptr && v->type == PMIX_BYTE_OBJECT) {
            const auto* b = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
            p.value.assign(b, b + v->data.bo.size);
        }
        p.done = true;
        p.done_cv.notify_all();
    }
};

} // namespace

std::vector<std::byte> PmixStore::get(std::string_view key, Deadline deadline)
{
    check_key("Store::get", key);
    pmix_proc_t from;
    PMIX_PROC_CONSTRUCT(&from);
    PMIX_LOAD_PROCID(&from, nspace_.c_str(), owner(key));
    const std::string k(key);
    for (;;) {
        // The owner's server holds the request until the key is committed,
        // or the timeout (whole seconds) passes.
        auto p = std::make_shared<PendingGet>();
        p->key = k;
        p->from = from;
        PMIX_INFO_CONSTRUCT(&p->info);
        p->seconds = timeout_seconds(deadline);
        PMIX_INFO_LOAD(&p->info, PMIX_TIMEOUT, &p->seconds, PMIX_INT);
        auto hold = std::make_unique<std::shared_ptr<PendingGet>>(p);
        const pmix_status_t started =
            PMIx_Get_nb(&p->from, p->key.c_str(), &p->info, 1, &PendingGet::answer, hold.get());
        if (started != PMIX_SUCCESS)
            pmix_fail("PMIx_Get_nb", started, fmt::format("key '{}' of rank {}", key, from.rank));
        (void)hold.release(); // the callback's now
        std::unique_lock lock(p->m);
        const auto until = std::min(deadline.when(), Clock::now() + std::chrono::hours(24));
        if (!p->done_cv.wait_until(lock, until, [&] { return p->done; }))
            timeout(key); // the request stays with PMIx; its answer goes to `p`
        if (p->rc == PMIX_SUCCESS)
            return std::move(p->value);
        if (p->rc != PMIX_ERR_NOT_FOUND && p->rc != PMIX_ERR_TIMEOUT)
            pmix_fail("PMIx_Get", p->rc, fmt::format("key '{}' of rank {}", key, from.rank));
        lock.unlock();
        if (deadline.expired())
            timeout(key);
        // Not there yet (a server that answers at once): ask again shortly.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

std::optional<std::vector<std::byte>> PmixStore::immediate(std::string_view call,
                                                          std::string_view key)
{
    check_key(call, key);
    pmix_proc_t from;
    PMIX_PROC_CONSTRUCT(&from);
    PMIX_LOAD_PROCID(&from, nspace_.c_str(), owner(key));
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool immediate = true;
    PMIX_INFO_LOAD(&info, PMIX_IMMEDIATE, &immediate, PMIX_BOOL);
    pmix_value_t* v = nullptr;
    const std::string k(key);
    const pmix_status_t rc = PMIx_Get(&from, k.c_str(), &info, 1, &v);
    PMIX_INFO_DESTRUCT(&info);
    std::optional<std::vector<std::byte>> out;
    if (rc == PMIX_SUCCESS && v != nullptr && v->type == PMIX_BYTE_OBJECT) {
        const auto* b = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
        out.emplace(b, b + v->data.bo.size);
    }
    if (v != nullptr)
        PMIX_VALUE_RELEASE(v);
    return out;
}

bool PmixStore::contains(std::string_view key)
{
    return immediate("Store::contains", key).has_value();
}

std::vector<std::optional<std::vector<std::byte>>>
PmixStore::get_now(std::span<const std::string> keys)
{
    // PMIX_IMMEDIATE: what this node's server holds now (a key of a rank on
    // another node that is not here yet reads as absent; the get that
    // follows waits for it).
    std::vector<std::optional<std::vector<std::byte>>> out;
    out.reserve(keys.size());
    for (const std::string& k : keys)
        out.push_back(immediate("Store::get", k));
    return out;
}

std::int64_t PmixStore::add(std::string_view, std::int64_t)
{
    throw UsageError("Store::add", -FI_EOPNOTSUPP, "",
                     "PMIx has no atomic counter: count with a fence (barrier) or another store");
}

bool PmixStore::erase(std::string_view)
{
    throw UsageError("Store::erase", -FI_EOPNOTSUPP, "",
                     "PMIx keeps what a process put for the job's life: it cannot erase a key");
}

void PmixStore::barrier(std::string_view key, std::size_t size, Deadline deadline, const Watch&)
{
    if (size != size_)
        throw UsageError("Store::barrier", -FI_EINVAL, "",
                         fmt::format("a PMIx barrier is a fence of the whole job ({} ranks), not "
                                     "of {}",
                                     size_, size));
    fence(key, {}, deadline);
}

void PmixStore::barrier_among(std::string_view key, std::span<const std::uint32_t> ranks,
                              Deadline deadline, const Watch&)
{
    for (const std::uint32_t r : ranks)
        if (r >= size_)
            throw UsageError("Store::barrier_among", -FI_EINVAL, "",
                             fmt::format("rank {} in a job of {} ranks", r, size_));
    if (ranks.size() == size_)
        ranks = {}; // all of them: the whole job's fence
    fence(key, ranks, deadline);
}

void PmixStore::fence(std::string_view key, std::span<const std::uint32_t> ranks,
                      Deadline deadline)
{
    std::vector<pmix_proc_t> procs(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        PMIX_PROC_CONSTRUCT(&procs[i]);
        PMIX_LOAD_PROCID(&procs[i], nspace_.c_str(), ranks[i]);
    }
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    // Always a timeout: after a rank's death a fence without one may never
    // end ("group: one of 8 ranks killed under mpirun --enable-recovery";
    // QUIRKS.md has the runs).
    int seconds = timeout_seconds(deadline);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
    const pmix_status_t rc =
        PMIx_Fence(procs.empty() ? nullptr : procs.data(), procs.size(), &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_ERR_PARTIAL_SUCCESS)
        throw Error("Store::barrier", -FI_ECONNRESET, "",
                    fmt::format("barrier '{}': a rank ended before reaching it (PMIx fence: "
                                "partial success)",
                                key),
                    nullptr, true);
    if (rc != PMIX_SUCCESS)
        pmix_fail("PMIx_Fence", rc,
                  fmt::format("barrier '{}' of {} ranks", key,
                              procs.empty() ? size_ : static_cast<std::uint32_t>(procs.size())));
}

const std::vector<bool>& PmixStore::running()
{
    const auto now = Clock::now();
    if (now - table_at_ < std::chrono::milliseconds(20))
        return running_;
    table_at_ = now;
    running_.clear();
    // Open MPI's mpirun answers a query qualified by PMIX_PROCID (the job's
    // wildcard), not by PMIX_NSPACE.
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, nspace_.c_str(), PMIX_RANK_WILDCARD);
    pmix_query_t q;
    PMIX_QUERY_CONSTRUCT(&q);
    pmix_status_t rc = PMIX_SUCCESS;
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PROC_TABLE);
    PMIX_QUERY_QUALIFIERS_CREATE(&q, 1);
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_PROCID, &job, PMIX_PROC);
    pmix_info_t* results = nullptr;
    std::size_t n = 0;
    rc = PMIx_Query_info(&q, 1, &results, &n);
    PMIX_QUERY_DESTRUCT(&q);
    if (rc == PMIX_SUCCESS && n >= 1 && results[0].value.type == PMIX_DATA_ARRAY &&
        results[0].value.data.darray != nullptr) {
        const pmix_data_array_t& table = *results[0].value.data.darray;
        const auto* entries = static_cast<const pmix_info_t*>(table.array);
        running_.assign(size_, true);
        for (std::size_t i = 0; table.type == PMIX_INFO && i < table.size; ++i) {
            if (entries[i].value.type != PMIX_PROC_INFO)
                continue;
            const pmix_proc_info_t& p = *entries[i].value.data.pinfo;
            // Launched and not yet ended (a rank that finalized and exited
            // shows UNDEF again; a killed one ABORTED_BY_SIG).
            if (p.proc.rank < size_)
                running_[p.proc.rank] = p.state > PMIX_PROC_STATE_UNDEF &&
                                        p.state < PMIX_PROC_STATE_UNTERMINATED;
        }
    }
    if (results != nullptr)
        PMIX_INFO_FREE(results, n);
    return running_;
}

bool PmixStore::live(std::string_view key)
{
    check_key("Store::live", key);
    const std::uint32_t r = owner(key);
    const std::lock_guard lock(table_m_);
    const auto& table = running();
    return table.empty() || table[r]; // a launcher that cannot say: taken as running
}

} // namespace weft
