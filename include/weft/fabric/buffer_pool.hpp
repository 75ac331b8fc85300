// SPDX-License-Identifier: MIT
/// @brief A pool of pre-registered, fixed-size buffers.
///
/// Registration is expensive (a system call, page pinning on RDMA devices):
/// register once, then hand out blocks. get() and put() are lock-free (a
/// Treiber stack of block indices with a version tag against ABA), so any
/// number of threads may share one pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "weft/fabric/domain.hpp"
#include "weft/fabric/memory_region.hpp"

namespace weft {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
public:
    /// `blocks` buffers of `block_size` bytes (rounded up to 64 for alignment),
    /// in one registration with `access`.
    static std::shared_ptr<BufferPool> create(std::shared_ptr<Domain> domain, std::size_t block_size,
                                              std::size_t blocks, Access access = Access::local,
                                              Placement placement = Placement::anywhere);

    /// A block on loan: returns itself to the pool when destroyed. Movable.
    class Block {
    public:
        Block() = default;
        Block(Block&& other) noexcept;
        Block& operator=(Block&& other) noexcept;
        ~Block();
        Block(const Block&) = delete;
        Block& operator=(const Block&) = delete;

        std::byte* data() const noexcept { return data_; }
        std::size_t size() const noexcept { return size_; }
        /// The whole block, or [offset, offset+len), for the data path.
        Local local() const noexcept
        {
            return {data_, size_, desc_, pool_ ? &pool_->region() : nullptr};
        }
        Local slice(std::size_t offset, std::size_t len) const;
        /// Byte offset of this block in the pool's region (for a peer's RemoteRegion).
        std::size_t offset() const noexcept;
        explicit operator bool() const noexcept { return pool_ != nullptr; }

    private:
        friend class BufferPool;
        Block(std::shared_ptr<BufferPool> pool, std::uint32_t index) noexcept;
        std::shared_ptr<BufferPool> pool_; // a loaned block keeps its pool alive
        std::uint32_t index_ = 0;
        std::byte* data_ = nullptr;
        std::size_t size_ = 0;
        void* desc_ = nullptr;
    };

    /// A free block, or nothing when all are on loan. Lock-free.
    std::optional<Block> try_get() noexcept;
    /// Blocks currently free (a snapshot).
    std::size_t available() const noexcept;
    std::size_t block_size() const noexcept { return block_size_; }
    std::size_t blocks() const noexcept { return next_.size(); }
    const MemoryRegion& region() const noexcept { return *region_; }

    struct Private;
    BufferPool(Private, std::shared_ptr<MemoryRegion> region, std::size_t block_size,
               std::size_t blocks);
    ~BufferPool();

private:
    void put(std::uint32_t index) noexcept;

    static constexpr std::uint32_t none = ~0u;
    std::shared_ptr<MemoryRegion> region_;
    std::size_t block_size_;
    std::vector<std::atomic<std::uint32_t>> next_; // free-list links
    std::atomic<std::uint64_t> head_;              // version << 32 | index of the first free block
    std::atomic<std::size_t> free_;
};

} // namespace weft
