// SPDX-License-Identifier: MIT
/// @brief Registered local memory (fi_mr) and the views the data path takes.
///
///     auto r = node->allocate(4096, weft::Access::remote_write); // or register_memory
///     send_to_peer(r->remote());            // a RemoteRegion: what the peer writes to
///     node->write(peer, r->slice(0, 64), theirs, 0, &ctx);       // a Local: what is posted
///
/// A region is shared_ptr-owned; what is posted on it keeps it alive until its
/// completion. revoke() withdraws remote access at once (docs/memory.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <rdma/fi_domain.h>

#include "weft/fabric/domain.hpp"
#include "weft/base/detail/fid.hpp"
#include "weft/fabric/remote_region.hpp"

namespace weft {

namespace lane {
class Segment;
} // namespace lane

class Endpoint;

/// What a region is for. Remote access is granted only when asked for, so an
/// exported read-only region cannot be written remotely. Local use (send and
/// receive source/sink, RMA source and read sink) is always allowed.
enum class Access : std::uint8_t {
    local = 0,
    remote_read = 1,
    remote_write = 2,
    remote_read_write = 3,
};

/// Where allocate() places memory: anywhere (the default), or on the NUMA
/// node of the device behind the domain (when the machine says which node).
enum class Placement : std::uint8_t { anywhere, near_device };

class MemoryRegion;

/// A registered span of local memory: what the data path takes as source or
/// sink. Trivially copyable; valid while its MemoryRegion lives. An endpoint
/// that posts an operation on it keeps `region` alive until the operation has
/// completed, so dropping the region meanwhile is safe.
struct Local {
    std::byte* addr = nullptr;
    std::size_t len = 0;
    void* desc = nullptr; ///< fi_mr_desc, passed on every post (needed under FI_MR_LOCAL)
    /// Where this span comes from (slice() sets it); nullptr for a span built
    /// by hand, which the caller keeps alive itself and weft cannot check.
    const MemoryRegion* region = nullptr;
};

/// Owns one registration (and, from allocate() and map_file(), the memory
/// too). Keeps its Domain alive. Registration is not the data path: it may
/// lock and allocate.
///
/// Memory a peer may reach outlives what the peer had under way: on every
/// provider but verbs, a write queued at this side (a killed peer's) is
/// carried out when this side next progresses, after the registration is
/// closed (Quirks::rma_target_in_software). Memory the region owns then
/// keeps its address range, not its pages, until the domain closes;
/// memory given to register_memory() is the caller's to keep that long.
class MemoryRegion : public std::enable_shared_from_this<MemoryRegion> {
public:
    /// Registers caller-owned memory, which must outlive the region (with
    /// remote access, the endpoints a peer may still write through: above).
    /// `bind_to` is required when the provider wants endpoint-bound regions
    /// (FI_MR_ENDPOINT); ignored otherwise.
    static std::shared_ptr<MemoryRegion> register_memory(std::shared_ptr<Domain> domain,
                                                         std::span<std::byte> memory,
                                                         Access access,
                                                         const Endpoint* bind_to = nullptr);
    /// Allocates page-aligned, zeroed memory owned by the region, and registers it.
    static std::shared_ptr<MemoryRegion> allocate(std::shared_ptr<Domain> domain, std::size_t size,
                                                  Access access, const Endpoint* bind_to = nullptr,
                                                  Placement placement = Placement::anywhere);
    /// Maps a file (shared, read-only unless `access` grants remote writes) and
    /// registers the mapping itself: peers read the file with RMA, no copy.
    static std::shared_ptr<MemoryRegion> map_file(std::shared_ptr<Domain> domain,
                                                  const std::string& path,
                                                  Access access = Access::remote_read,
                                                  const Endpoint* bind_to = nullptr);
    /// The NUMA node the memory's first page is on, or -1 when unknown.
    int numa_node() const noexcept;

    std::byte* data() const noexcept { return memory_.data(); }
    std::size_t size() const noexcept { return memory_.size(); }
    std::span<std::byte> bytes() const noexcept { return memory_; }
    void* desc() const noexcept { return desc_; }
    std::uint64_t key() const noexcept { return key_; }
    Access access() const noexcept { return access_; }
    fid_mr* get() const noexcept { return fid_.get(); }

    /// [offset, offset+len) as a data-path view; throws UsageError when out of bounds.
    Local slice(std::size_t offset, std::size_t len) const
    {
        if (revoked_ || offset > memory_.size() || len > memory_.size() - offset) [[unlikely]]
            bad_slice(offset, len);
        return {memory_.data() + offset, len, desc_, this};
    }
    Local all() const { return slice(0, memory_.size()); }

    /// The descriptor a peer needs to reach this region; throws UsageError for a
    /// region registered for local access only.
    RemoteRegion remote() const;

    /// Deregisters now (fi_close), before the object goes: a peer that still
    /// holds remote() can no longer reach the memory (on providers that check
    /// keys: see Quirks::keys_unchecked), and slice()/all()/remote() throw
    /// UsageError. Owned memory stays valid until the region is destroyed.
    /// Returns false when the region was already revoked (a no-op).
    bool revoke() noexcept;
    /// How many regions this process has revoked: a queue that remembers the
    /// last region it checked looks again after any revocation.
    static std::uint32_t revocations() noexcept
    {
        return revocations_.load(std::memory_order_relaxed);
    }
    bool revoked() const noexcept { return revoked_; }
    /// True for read-only memory: a map_file mapping without remote write,
    /// or memory given to register_memory that the process cannot write (a
    /// `static const` object, a PROT_READ mapping). It can be a source, never
    /// a sink (the sink of a read, an atomic's result): such a post is
    /// refused with UsageError before it reaches the provider.
    bool read_only() const noexcept { return read_only_; }
    /// The domain the region is registered on: a Local of it works only with
    /// that domain's endpoints (another's is refused before posting).
    const Domain& domain() const noexcept { return *domain_; }
    /// The sealed memfd behind memory allocate() made for sharing on this
    /// host (Domain::shares_allocations), or none (weft's own: src/lane). A
    /// registration of such memory on another domain that shares allocations
    /// has it too (borrowed): one allocation, offered as one memfd on every
    /// Node, its access no wider than the memfd's seal allows.
    lane::Segment* segment() const noexcept { return segment_.get(); }
    /// Whether segment() is another region's (register_memory), not this one's;
    /// whether other registrations borrow this one's.
    bool segment_borrowed() const noexcept { return segment_borrowed_; }
    bool segment_shared() const noexcept { return segment_ && segment_.use_count() > 2; }

    struct Private;
    MemoryRegion(Private, std::shared_ptr<Domain> domain, std::span<std::byte> memory,
                 Access access, std::shared_ptr<std::byte[]> owned);
    ~MemoryRegion();
    MemoryRegion(const MemoryRegion&) = delete;
    MemoryRegion& operator=(const MemoryRegion&) = delete;

private:
    void register_with(const Endpoint* bind_to);
    void check_live(const char* call) const;
    [[noreturn]] void bad_slice(std::size_t offset, std::size_t len) const;
    inline static std::atomic<std::uint32_t> revocations_{0};
    bool read_only_ = false; // read-only memory: no local write roles (verbs needs that)
    bool revoked_ = false;

    std::shared_ptr<Domain> domain_;
    std::shared_ptr<std::byte[]> owned_; // from allocate(), map_file(); freed (or retired) after the fid closes
    std::shared_ptr<lane::Segment> segment_; // owned_'s memfd, when allocate() shared it
    bool segment_borrowed_ = false;          // segment_ is another allocation's
    bool watched_ = false;                   // the domain's watcher was told of it
    bool revoke_now(bool destroying) noexcept;
    std::span<std::byte> memory_;
    Access access_;
    std::uint64_t key_ = 0;
    bool requested_key_ = false;
    void* desc_ = nullptr;
    detail::FidPtr<fid_mr> fid_;
};

} // namespace weft
