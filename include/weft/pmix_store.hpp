// SPDX-License-Identifier: MIT
/// @brief The Store of a job launched by a PMIx launcher (Open MPI's mpirun,
/// Slurm's srun --mpi=pmix): no address, port or server of weft's own.
///
/// PMIx keeps every key with the process that put it, and reading one asks
/// that process's PMIx server for it (a direct modex), waiting until it is
/// committed. So a key has an owner: `.../<r>` (a number after the last '/')
/// is rank r's, any other key rank 0's; set() a key only in its owner. Group
/// keeps to this. barrier() is a PMIx fence of the whole job (its key is not
/// used; every rank calls the same barriers in the same order). PMIx has no
/// atomic counter and no removal: add() and erase() are UsageError.
#pragma once

#include <cstdint>
#include <string>

#include "weft/store.hpp"

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
    bool erase(std::string_view key) override;
    /// A PMIx fence (`watch` is not called: the fence itself reports a rank
    /// that ended, as partial success).
    void barrier(std::string_view key, std::size_t size, Deadline deadline,
                 const Watch& watch) override;
    std::string describe() const override;

private:
    /// The rank whose key `key` is.
    std::uint32_t owner(std::string_view key) const;

    std::string nspace_;
    std::uint32_t rank_ = 0;
    std::uint32_t size_ = 0;
};

} // namespace weft
