// SPDX-License-Identifier: MIT
/// @brief The libfabric domain (fi_domain): one device / interface, the scope of
/// memory registrations and keys.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include <rdma/fi_domain.h>

#include "weft/fabric/fabric.hpp"
#include "weft/info/info.hpp"

namespace weft {

class MemoryRegion;

/// Told of every region with remote access registered on a domain, and of its
/// end (a Node's same-host lane offers them to co-located peers). Called on
/// the registering thread; revoking() must not throw.
class RegionWatcher {
public:
    virtual void registered(MemoryRegion& region) = 0;
    /// `destroying`: the region goes (its memory with it), else revoke().
    virtual void revoking(MemoryRegion& region, bool destroying) noexcept = 0;

protected:
    ~RegionWatcher() = default;
};

/// Owns a fid_domain and keeps its Fabric alive. Children (endpoints, queues,
/// memory regions) hold a shared_ptr<Domain>, so no destruction order can hit
/// -FI_EBUSY. Used by one thread at a time (FI_THREAD_DOMAIN) unless the
/// selection runs a progress thread, which makes it FI_THREAD_SAFE.
class Domain {
public:
    /// `info` is the selection's entry; its mr_mode / threading are used as given.
    static std::shared_ptr<Domain> open(std::shared_ptr<Fabric> fabric, const Info& info);

    fid_domain* get() const noexcept { return fid_.get(); }
    const Info& info() const noexcept { return info_; }
    const std::shared_ptr<Fabric>& fabric() const noexcept { return fabric_; }
    std::string_view provider() const noexcept { return info_.provider(); }
    std::uint64_t mr_mode() const noexcept { return info_.mr_mode(); }
    /// What the info bits do not say (from providers/), computed once at open.
    const Quirks& quirks() const noexcept { return quirks_; }
    /// Who opened it, for errors that name another domain's memory ("Node
    /// 0x1f2e... (tcp MSG)"); set once, before the domain is shared.
    const std::string& owner() const noexcept { return owner_; }
    void set_owner(std::string owner) { owner_ = std::move(owner); }

    /// A new requested key for a registration (FI_MR_PROV_KEY unset): random
    /// (unguessable), fits mr_key_size, unique within this domain.
    std::uint64_t reserve_key();
    /// Returns a key when its registration is closed.
    void release_key(std::uint64_t key) noexcept;

    /// Takes memory a region with remote access owned once the region is
    /// gone, where a write queued here may still land in it
    /// (Quirks::rma_target_in_software): its pages go back to the system now
    /// (`pages`, whole pages: what lands there later lands in zeroed pages),
    /// its address range when this domain closes, after its endpoints.
    void retire(std::shared_ptr<std::byte[]> memory, std::span<std::byte> pages) noexcept;

    /// The one watcher of this domain's regions (a Node's lane), or none.
    void watch_regions(RegionWatcher* watcher) noexcept { watcher_ = watcher; }
    RegionWatcher* region_watcher() const noexcept { return watcher_; }
    /// allocate() backs regions with remote access by a sealed memfd, which a
    /// co-located peer can map (set by a Node whose same-host lane is on).
    void share_allocations(bool on) noexcept { share_allocations_ = on; }
    bool shares_allocations() const noexcept { return share_allocations_; }

    struct Private;
    Domain(Private, std::shared_ptr<Fabric> fabric, Info info, detail::FidPtr<fid_domain> fid);

private:
    std::shared_ptr<Fabric> fabric_;
    Info info_;
    Quirks quirks_;
    std::string owner_;
    RegionWatcher* watcher_ = nullptr;
    bool share_allocations_ = false;
    std::mutex mutex_; // keys and retired memory: registration is not the data path
    std::unordered_set<std::uint64_t> keys_;
    std::vector<std::shared_ptr<std::byte[]>> retired_; // freed after fid_ closes
    detail::FidPtr<fid_domain> fid_;
};

} // namespace weft
