// SPDX-License-Identifier: MIT
#include "weft/fabric/registration_cache.hpp"

#include <rdma/fi_errno.h>

#include "weft/base/error.hpp"

namespace weft {

RegistrationCache::RegistrationCache(std::shared_ptr<Domain> domain, Access access,
                                     std::size_t capacity)
    : domain_(std::move(domain)), access_(access), capacity_(capacity ? capacity : 1)
{
}

Local RegistrationCache::get(const std::shared_ptr<const void>& owner, std::span<std::byte> bytes)
{
    if (!owner)
        throw UsageError("RegistrationCache::get", -FI_EINVAL, std::string(domain_->provider()),
                         "the memory needs an owner: pass the shared_ptr that keeps it alive");
    const auto addr = reinterpret_cast<std::uintptr_t>(bytes.data());
    // The entry of this owner that starts at or below `addr`, if it covers `bytes`.
    Key probe{owner, addr};
    auto it = entries_.upper_bound(probe);
    if (it != entries_.begin()) {
        --it;
        const Key& k = it->first;
        const bool same_owner = !k.owner.owner_before(probe.owner) && !probe.owner.owner_before(k.owner);
        const auto& mr = *it->second.region;
        const auto base = reinterpret_cast<std::uintptr_t>(mr.data());
        if (same_owner && addr >= base && addr + bytes.size() <= base + mr.size()) {
            ++stats_.hits;
            lru_.splice(lru_.begin(), lru_, it->second.lru);
            return {bytes.data(), bytes.size(), mr.desc()};
        }
    }
    ++stats_.misses;
    make_room();
    auto region = MemoryRegion::register_memory(domain_, bytes, access_);
    auto [pos, inserted] = entries_.emplace(Key{owner, addr}, Entry{region, {}});
    if (!inserted) { // same owner and start, but a longer span: replace
        lru_.erase(pos->second.lru);
        pos->second.region = region;
    }
    lru_.push_front(&pos->first);
    pos->second.lru = lru_.begin();
    return {bytes.data(), bytes.size(), region->desc()};
}

void RegistrationCache::make_room()
{
    // Entries whose owner is gone can never be hit again: drop them first.
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->first.owner.expired()) {
            lru_.erase(it->second.lru);
            it = entries_.erase(it);
            ++stats_.evictions;
        } else {
            ++it;
        }
    }
    while (entries_.size() >= capacity_ && !lru_.empty()) {
        const Key* oldest = lru_.back();
        lru_.pop_back();
        entries_.erase(*oldest);
        ++stats_.evictions;
    }
}

} // namespace weft
