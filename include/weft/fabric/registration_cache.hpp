// SPDX-License-Identifier: MIT
/// @brief Registrations of caller-owned memory, reused across operations.
///
/// Stale entries are impossible by ownership, not by watching free() or
/// munmap(): the caller names the object that owns the memory (a shared_ptr),
/// an entry is found only through that same owner, and the cache holds only a
/// weak reference. Memory that was freed has an expired owner; memory reused at
/// the same address has a different owner. Neither can hit an old entry
/// (libfabric#5662, #11282: provider caches that watched memory got it wrong).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <span>

#include "weft/fabric/domain.hpp"
#include "weft/fabric/memory_region.hpp"

namespace weft {

class RegistrationCache {
public:
    /// `capacity` registrations at most; the least recently used live one goes first.
    RegistrationCache(std::shared_ptr<Domain> domain, Access access = Access::local,
                      std::size_t capacity = 256);

    /// A data-path view of `bytes`, which `owner` keeps alive. Registers on a miss.
    /// One thread at a time.
    Local get(const std::shared_ptr<const void>& owner, std::span<std::byte> bytes);

    struct Stats {
        std::uint64_t hits = 0;
        std::uint64_t misses = 0;
        std::uint64_t evictions = 0; ///< entries dropped for space or an expired owner
    };
    const Stats& stats() const noexcept { return stats_; }
    std::size_t size() const noexcept { return entries_.size(); }

private:
    struct Key {
        std::weak_ptr<const void> owner;
        std::uintptr_t addr;
        bool operator<(const Key& other) const noexcept
        {
            if (owner.owner_before(other.owner))
                return true;
            if (other.owner.owner_before(owner))
                return false;
            return addr < other.addr;
        }
    };
    struct Entry {
        std::shared_ptr<MemoryRegion> region;
        std::list<const Key*>::iterator lru;
    };
    void make_room();

    std::shared_ptr<Domain> domain_;
    Access access_;
    std::size_t capacity_;
    std::map<Key, Entry> entries_;
    std::list<const Key*> lru_; // most recent first
    Stats stats_;
};

} // namespace weft
