// SPDX-License-Identifier: MIT
/// @brief The Store of a job launched by a PMIx launcher (Open MPI's mpirun,
/// Slurm's srun --mpi=pmix): no address, port or server of weft's own.
///
/// PMIx keeps every key with the process that put it, and reading one asks
/// that process's PMIx server for it (a direct modex), waiting until it is
/// committed. So a key has an owner: `.../<r>` (a number after the last '/')
/// is rank r's, any other key rank 0's; set() a key only in its owner. Group
/// keeps to this. barrier() is a PMIx fence of the whole job, barrier_among()
/// of the ranks named (their key is not used; every rank calls the same
/// barriers in the same order). PMIx has no atomic counter and no removal:
/// add() and erase() are UsageError.
///
/// A rank that dies: PMIx 4.2's events do not reach the other ranks under
/// Open MPI 4.1's mpirun (it sends them with a range PMIx refuses), so
/// live() asks the launcher's process table (PMIX_QUERY_PROC_TABLE, at most
/// every 20 ms): a key's owner lives while its process runs. A fence that a
/// rank's death breaks ends with an Error (peer_lost()). For the others to
/// go on, start the job with `mpirun --enable-recovery` (else mpirun ends
/// them all a second later); srun lets them go on. contains() sees the keys
/// this node's PMIx server holds (every rank's, on one node; elsewhere what
/// was fetched already).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "weft/stores/store.hpp"

namespace weft {

class PmixStore final : public Store {
public:
    /// PMIx_Init; Error naming the fix when no PMIx server launched this process.
    PmixStore();
    ~PmixStore() override;
    PmixStore(const PmixStore&) = delete;
    PmixStore& operator=(const PmixStore&) = delete;

    /// This process's rank and the job's size, as the launcher gave them.
    std::uint32_t rank() const noexcept { return rank_; }
    std::uint32_t size() const noexcept { return size_; }
    /// True when a PMIx launcher started this process (PMIX_RANK is set).
    static bool launched();

    using Store::barrier;
    using Store::get;
    using Store::set;
    void set(std::string_view key, std::span<const std::byte> value) override;
    std::vector<std::byte> get(std::string_view key, Deadline deadline) override;
    std::int64_t add(std::string_view key, std::int64_t delta) override;
    bool contains(std::string_view key) override;
    /// What this node's PMIx server holds now (PMIX_IMMEDIATE), a key each.
    std::vector<std::optional<std::vector<std::byte>>>
    get_now(std::span<const std::string> keys) override;
    bool erase(std::string_view key) override;
    /// A PMIx fence (`watch` is not called: the fence itself reports a rank
    /// that ended, as partial success).
    void barrier(std::string_view key, std::size_t size, Deadline deadline,
                 const Watch& watch) override;
    void barrier_among(std::string_view key, std::span<const std::uint32_t> ranks,
                       Deadline deadline, const Watch& watch) override;
    /// Whether the key's owner still runs, by the launcher's process table
    /// (true where the launcher cannot say).
    bool live(std::string_view key) override;
    std::string describe() const override;

private:
    /// The rank whose key `key` is.
    std::uint32_t owner(std::string_view key) const;
    /// `key`'s value if this node's server holds it now (PMIX_IMMEDIATE).
    std::optional<std::vector<std::byte>> immediate(std::string_view call, std::string_view key);

    /// Fences `procs` (none: the whole job).
    void fence(std::string_view key, std::span<const std::uint32_t> ranks, Deadline deadline);
    /// The launcher's process table: by rank, whether it runs; empty when it
    /// cannot say. Asked again after 20 ms.
    const std::vector<bool>& running();

    std::string nspace_;
    std::mutex table_m_;
    std::vector<bool> running_;
    Clock::time_point table_at_{};
    std::uint32_t rank_ = 0;
    std::uint32_t size_ = 0;
};

} // namespace weft
