// SPDX-License-Identifier: MIT
#include "weft/pmix_store.hpp"

#include <pmix.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/error.hpp"

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
        pmix_info_t info;
        PMIX_INFO_CONSTRUCT(&info);
        int seconds = timeout_seconds(deadline);
        PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
        pmix_value_t* v = nullptr;
        const pmix_status_t rc = PMIx_Get(&from, k.c_str(), &info, 1, &v);
        PMIX_INFO_DESTRUCT(&info);
        if (rc == PMIX_SUCCESS && v != nullptr) {
            std::vector<std::byte> out;
            if (v->type == PMIX_BYTE_OBJECT) {
                const auto* p = reinterpret_cast<const std::byte*>(v->data.bo.bytes);
                out.assign(p, p + v->data.bo.size);
            }
            PMIX_VALUE_RELEASE(v);
            return out;
        }
        if (rc != PMIX_ERR_NOT_FOUND && rc != PMIX_ERR_TIMEOUT)
            pmix_fail("PMIx_Get", rc, fmt::format("key '{}' of rank {}", key, from.rank));
        if (deadline.expired())
            timeout(key);
        // Not there yet (a server that answers at once): ask again shortly.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool PmixStore::contains(std::string_view key)
{
    check_key("Store::contains", key);
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
    if (v != nullptr)
        PMIX_VALUE_RELEASE(v);
    return rc == PMIX_SUCCESS;
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
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    int seconds = timeout_seconds(deadline);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
    const pmix_status_t rc = PMIx_Fence(nullptr, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc == PMIX_ERR_PARTIAL_SUCCESS)
        throw Error("Store::barrier", -FI_ECONNRESET, "",
                    fmt::format("barrier '{}': a rank of the job ended before reaching it (PMIx "
                                "fence: partial success); its launcher's output says which",
                                key),
                    nullptr, true);
    if (rc != PMIX_SUCCESS)
        pmix_fail("PMIx_Fence", rc, fmt::format("barrier '{}' of {} ranks", key, size_));
}

} // namespace weft
