// SPDX-License-Identifier: MIT
#include "shared_allocations.hpp"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include "segment.hpp"

namespace weft::detail {
namespace {

struct SharedAllocations {
    std::mutex mutex;
    std::map<std::uintptr_t, std::weak_ptr<lane::Segment>> by_start;
};

SharedAllocations& shared()
{
    static SharedAllocations s;
    return s;
}

} // namespace

void remember_shared_allocation(const std::shared_ptr<lane::Segment>& segment)
{
    SharedAllocations& s = shared();
    const std::lock_guard lock(s.mutex);
    std::erase_if(s.by_start, [](const auto& e) { return e.second.expired(); });
    s.by_start[reinterpret_cast<std::uintptr_t>(segment->data())] = segment;
}

std::shared_ptr<lane::Segment> shared_allocation_holding(std::span<std::byte> memory,
                                                         Access access)
{
    const auto begin = reinterpret_cast<std::uintptr_t>(memory.data());
    SharedAllocations& s = shared();
    const std::lock_guard lock(s.mutex);
    auto it = s.by_start.upper_bound(begin);
    if (it == s.by_start.begin())
        return nullptr;
    auto segment = std::prev(it)->second.lock();
    const bool peers_write = access == Access::remote_write || access == Access::remote_read_write;
    if (!segment ||
        begin + memory.size() > reinterpret_cast<std::uintptr_t>(segment->data()) + segment->size() ||
        (peers_write && segment->peers() != lane::PeerAccess::read_write))
        return nullptr;
    return segment;
}

} // namespace weft::detail
