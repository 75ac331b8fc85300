// SPDX-License-Identifier: MIT
#include "shared_allocations.hpp"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

#include <unistd.h>

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
    // The whole allocation (a peer maps all of the memfd: a part of it would
    // hand out the rest), sealed (revoke() of the allocation unseals what it
    // detaches), and exactly the access its seal gives peers (a read-only
    // registration of a read-write memfd would be writable by a peer that
    // maps it so).
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const auto peers = access == Access::remote_read ? lane::PeerAccess::read
                                                     : lane::PeerAccess::read_write;
    if (!segment || !segment->sealed() ||
        begin != reinterpret_cast<std::uintptr_t>(segment->data()) ||
        memory.size() > segment->size() || segment->size() - memory.size() >= page ||
        segment->peers() != peers)
        return nullptr;
    return segment;
}

} // namespace weft::detail
