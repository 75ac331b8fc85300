// SPDX-License-Identifier: MIT
#include "weft/fabric/buffer_pool.hpp"

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {
namespace {

constexpr std::uint64_t pack(std::uint64_t version, std::uint32_t index) noexcept
{
    return version << 32 | index;
}
constexpr std::uint32_t index_of(std::uint64_t head) noexcept
{
    return static_cast<std::uint32_t>(head);
}

} // namespace

struct BufferPool::Private {};

BufferPool::BufferPool(Private, std::shared_ptr<MemoryRegion> region, std::size_t block_size,
                       std::size_t blocks)
    : region_(std::move(region)), block_size_(block_size), next_(blocks), free_(blocks)
{
    for (std::size_t i = 0; i < blocks; ++i)
        next_[i].store(i + 1 < blocks ? static_cast<std::uint32_t>(i + 1) : none,
                       std::memory_order_relaxed);
    head_.store(pack(0, blocks ? 0 : none), std::memory_order_release);
}

BufferPool::~BufferPool() = default;

std::shared_ptr<BufferPool> BufferPool::create(std::shared_ptr<Domain> domain,
                                               std::size_t block_size, std::size_t blocks,
                                               Access access, Placement placement)
{
    if (block_size == 0 || blocks == 0 || blocks >= none)
        throw UsageError("BufferPool::create", -FI_EINVAL, std::string(domain->provider()),
                         fmt::format("{} blocks of {} B: both must be positive", blocks,
                                     block_size));
    const std::size_t stride = (block_size + 63) / 64 * 64;
    auto region = MemoryRegion::allocate(std::move(domain), stride * blocks, access, nullptr,
                                         placement);
    return std::make_shared<BufferPool>(Private{}, std::move(region), stride, blocks);
}

std::optional<BufferPool::Block> BufferPool::try_get() noexcept
{
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
        const std::uint32_t index = index_of(head);
        if (index == none)
            return std::nullopt;
        const std::uint32_t next = next_[index].load(std::memory_order_relaxed);
        if (head_.compare_exchange_weak(head, pack((head >> 32) + 1, next),
                                        std::memory_order_acq_rel, std::memory_order_acquire)) {
            free_.fetch_sub(1, std::memory_order_relaxed);
            return Block(shared_from_this(), index);
        }
    }
}

void BufferPool::put(std::uint32_t index) noexcept
{
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    for (;;) {
        next_[index].store(index_of(head), std::memory_order_relaxed);
        if (head_.compare_exchange_weak(head, pack((head >> 32) + 1, index),
                                        std::memory_order_release, std::memory_order_relaxed)) {
            free_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
    }
}

std::size_t BufferPool::available() const noexcept { return free_.load(std::memory_order_relaxed); }

BufferPool::Block::Block(std::shared_ptr<BufferPool> pool, std::uint32_t index) noexcept
    : pool_(std::move(pool)), index_(index),
      data_(pool_->region_->data() + index * pool_->block_size_), size_(pool_->block_size_),
      desc_(pool_->region_->desc())
{
}

BufferPool::Block::Block(Block&& other) noexcept
    : pool_(std::move(other.pool_)), index_(other.index_), data_(other.data_),
      size_(other.size_), desc_(other.desc_)
{
}

BufferPool::Block& BufferPool::Block::operator=(Block&& other) noexcept
{
    if (this != &other) {
        if (pool_)
            pool_->put(index_);
        pool_ = std::move(other.pool_);
        index_ = other.index_;
        data_ = other.data_;
        size_ = other.size_;
        desc_ = other.desc_;
    }
    return *this;
}

BufferPool::Block::~Block()
{
    if (pool_)
        pool_->put(index_);
}

Local BufferPool::Block::slice(std::size_t offset, std::size_t len) const
{
    if (offset > size_ || len > size_ - offset)
        throw UsageError("BufferPool::Block::slice", -FI_EINVAL, "",
                         fmt::format("[{}, +{}) is outside the {} B block", offset, len, size_));
    return {data_ + offset, len, desc_, &pool_->region()};
}

std::size_t BufferPool::Block::offset() const noexcept
{
    return static_cast<std::size_t>(data_ - pool_->region_->data());
}

} // namespace weft
