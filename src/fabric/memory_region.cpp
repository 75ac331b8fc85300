// SPDX-License-Identifier: MIT
#include "weft/fabric/memory_region.hpp"
#include "segment.hpp"
#include "shared_allocations.hpp"
#include "check.hpp"

#include <fcntl.h>
#include <numaif.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>
#include <string>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "traits.hpp"
#include "weft/fabric/endpoint.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace {

std::string limit_text(rlim_t v)
{
    return v == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", v / 1024);
}

std::string memlock_text()
{
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0)
        return "RLIMIT_MEMLOCK unknown";
    return fmt::format("RLIMIT_MEMLOCK is {} (soft) / {} (hard); if the provider pins memory, "
                       "raise it: `ulimit -l unlimited`, LimitMEMLOCK=infinity for systemd "
                       "services, or a memlock line in /etc/security/limits.conf",
                       limit_text(lim.rlim_cur), limit_text(lim.rlim_max));
}

/// Memory and swap of this machine, in bytes (0 when unknown).
std::uint64_t machine_memory()
{
    struct sysinfo si{};
    if (sysinfo(&si) != 0)
        return 0;
    return (std::uint64_t(si.totalram) + si.totalswap) * si.mem_unit;
}

/// What the process may do with [p, p+n): true when every byte is mapped
/// writable, false when some is mapped read-only; nullopt when some is not
/// mapped at all. From /proc/self/maps (registration is not the data path).
std::optional<bool> writable(const std::byte* p, std::size_t n)
{
    std::ifstream maps("/proc/self/maps");
    auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t end = at + n;
    bool all_writable = true;
    std::string line;
    while (at < end && std::getline(maps, line)) {
        std::uintptr_t lo = 0;
        std::uintptr_t hi = 0;
        char perms[5] = {};
        if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %4s", &lo, &hi, perms) != 3)
            continue;
        if (hi <= at)
            continue;
        if (lo > at)
            return std::nullopt; // a gap: [at, lo) is not mapped
        all_writable = all_writable && perms[1] == 'w';
        at = hi;
    }
    if (at < end)
        return maps ? std::optional<bool>() : std::optional<bool>(true); // unreadable: assume so
    return all_writable;
}

} // namespace

struct MemoryRegion::Private {};

namespace {

// Prefers the device's NUMA node for [p, +len); the zeroing that follows
// touches the pages so that they land there.
void prefer_device_node(const Domain& domain, void* p, std::size_t len)
{
    const int node = providers::numa_node(domain.info().get());
    if (node >= 0 && node < 64) {
        const unsigned long mask = 1ul << node;
        (void)mbind(p, len, MPOL_PREFERRED, &mask, 64, 0);
    }
}

} // namespace

MemoryRegion::MemoryRegion(Private, std::shared_ptr<Domain> domain, std::span<std::byte> memory,
                           Access access, std::shared_ptr<std::byte[]> owned)
    : domain_(std::move(domain)), owned_(std::move(owned)), memory_(memory), access_(access)
{
}

MemoryRegion::~MemoryRegion()
{
    (void)revoke_now(true); // close before the key is returned and before owned_ is freed
    // A write or read still queued at this side's provider (a killed peer's)
    // may yet land, key checked or not: the domain keeps the range while an
    // endpoint of it may be open (this region is not its only owner).
    if (owned_ && access_ != Access::local && domain_->quirks().rma_target_in_software &&
        domain_.use_count() > 1) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        const std::size_t whole = (memory_.size() + page - 1) / page * page;
        domain_->retire(std::move(owned_), {memory_.data(), whole});
    }
}

bool MemoryRegion::revoke() noexcept { return revoke_now(false); }

bool MemoryRegion::revoke_now(bool destroying) noexcept
{
    if (revoked_)
        return false;
    if (watched_ && domain_->region_watcher() != nullptr)
        domain_->region_watcher()->revoking(*this, destroying); // peers on the lane first
    revoked_ = true;
    revocations_.fetch_add(1, std::memory_order_relaxed);
    fid_.reset();
    desc_ = nullptr;
    if (requested_key_)
        domain_->release_key(key_);
    return true;
}

void MemoryRegion::check_live(const char* call) const
{
    if (revoked_) [[unlikely]]
        throw UsageError(call, -FI_EINVAL, std::string(domain_->provider()),
                         fmt::format("the {} B region (key {:#x}) was revoked: register the "
                                     "memory again to use it",
                                     memory_.size(), key_));
}

std::shared_ptr<MemoryRegion> MemoryRegion::register_memory(std::shared_ptr<Domain> domain,
                                                            std::span<std::byte> memory,
                                                            Access access,
                                                            const Endpoint* bind_to)
{
    if (memory.empty() || memory.data() == nullptr)
        throw UsageError("register_memory", -FI_EINVAL, std::string(domain->provider()),
                         "cannot register an empty span: give the region at least one byte");
    // Memory the process cannot write (a static const buffer, a PROT_READ
    // mapping) is a source only: on tcp and shm a read into it, or a peer's
    // write, would fault inside the provider (SIGSEGV), and verbs would refuse
    // the registration itself.
    const auto can_write = writable(memory.data(), memory.size());
    if (!can_write)
        throw UsageError("register_memory", -FI_EFAULT, std::string(domain->provider()),
                         fmt::format("[{}, +{}) is not all mapped memory of this process: "
                                     "register memory the process owns",
                                     static_cast<const void*>(memory.data()), memory.size()));
    const bool remote_write = access == Access::remote_write || access == Access::remote_read_write;
    if (!*can_write && remote_write)
        throw UsageError("register_memory", -FI_EACCES, std::string(domain->provider()),
                         fmt::format("[{}, +{}) is read-only memory (a const object or a "
                                     "read-only mapping): peers cannot write it. Register it "
                                     "with Access::remote_read or Access::local, or register "
                                     "writable memory",
                                     static_cast<const void*>(memory.data()), memory.size()));
    std::shared_ptr<lane::Segment> borrowed;
    if (domain->shares_allocations() && access != Access::local)
        borrowed = detail::shared_allocation_holding(memory, access);
    auto mr = std::make_shared<MemoryRegion>(Private{}, std::move(domain), memory, access, nullptr);
    mr->read_only_ = !*can_write;
    mr->segment_ = std::move(borrowed);
    mr->segment_borrowed_ = mr->segment_ != nullptr;
    mr->register_with(bind_to);
    return mr;
}

std::shared_ptr<MemoryRegion> MemoryRegion::allocate(std::shared_ptr<Domain> domain,
                                                     std::size_t size, Access access,
                                                     const Endpoint* bind_to, Placement placement)
{
    if (size == 0)
        throw UsageError("MemoryRegion::allocate", -FI_EINVAL, std::string(domain->provider()),
                         "cannot allocate an empty region");
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    // The largest size a pointer can span after rounding to whole pages.
    const std::size_t largest = (std::size_t{PTRDIFF_MAX} / page) * page;
    if (size > largest)
        throw UsageError("MemoryRegion::allocate", -FI_EINVAL, std::string(domain->provider()),
                         fmt::format("{} B cannot be allocated: no address space holds more than "
                                     "{} B; ask for what the region needs",
                                     size, largest));
    const std::size_t rounded = (size + page - 1) / page * page;
    // allocate() zeroes what it returns: under overcommit a region larger than
    // memory and swap would be granted, then the zeroing would summon the OOM killer.
    const std::uint64_t machine = machine_memory();
    const bool shared = domain->shares_allocations() && access != Access::local;
    void* p = machine && rounded > machine ? nullptr
              : shared                     ? reinterpret_cast<void*>(1) // the memfd's, below
                                           : std::aligned_alloc(page, rounded);
    if (!p)
        detail::throw_error(
            "MemoryRegion::allocate", -FI_ENOMEM, std::string(domain->provider()),
            fmt::format("could not allocate {} B ({:.1f} GiB; memory and swap here: {:.1f} GiB): "
                        "ask for less, or register memory the application already has "
                        "(MemoryRegion::register_memory)",
                        size, double(size) / double(1ull << 30),
                        double(machine) / double(1ull << 30)));
    std::shared_ptr<std::byte[]> owned;
    std::shared_ptr<lane::Segment> segment;
    if (shared) {
        // A sealed memfd a co-located peer maps (src/lane/segment.hpp), sealed
        // read-only for it unless peers may write.
        segment = std::make_shared<lane::Segment>(lane::Segment::create(rounded, "region"));
        segment->seal(access == Access::remote_read ? lane::PeerAccess::read
                                                    : lane::PeerAccess::read_write);
        p = segment->data();
        owned = std::shared_ptr<std::byte[]>(segment->data(), [segment](std::byte*) {});
        detail::remember_shared_allocation(segment);
    } else {
        owned = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                             [](std::byte* q) { std::free(q); });
    }
    if (placement == Placement::near_device)
        prefer_device_node(*domain, p, rounded);
    std::memset(p, 0, rounded);
    auto mr = std::make_shared<MemoryRegion>(Private{}, std::move(domain),
                                             std::span(owned.get(), size), access, owned);
    mr->segment_ = std::move(segment);
    mr->register_with(bind_to);
    return mr;
}

std::shared_ptr<MemoryRegion> MemoryRegion::map_file(std::shared_ptr<Domain> domain,
                                                     const std::string& path, Access access,
                                                     const Endpoint* bind_to)
{
    const bool writable = access == Access::remote_write || access == Access::remote_read_write;
    const detail::Fd fd(::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC));
    if (!fd)
        detail::throw_error("open", -errno, std::string(domain->provider()),
                            fmt::format("cannot open {} to map it", path));
    struct stat st{};
    if (fstat(fd.get(), &st) != 0 || st.st_size == 0)
        throw UsageError("MemoryRegion::map_file", -FI_EINVAL, std::string(domain->provider()),
                         fmt::format("{} is empty or cannot be read: nothing to map", path));
    const auto size = static_cast<std::size_t>(st.st_size);
    // A provider that pins registered memory cannot pin a read-only shared
    // file mapping on Linux before 6.2 (ib_umem_get asks for FOLL_WRITE |
    // FOLL_FORCE: EFAULT on rxe and siw), and ofi_rxm registers with local
    // write anyway: there a read-only file is mapped private and writable. Its
    // pages are copied once when pinned; the file is never written ("file
    // regions: peers read an mmap'ed file, no copy").
    const bool private_copy = !writable && providers::traits_for(domain->provider()).pins_memory;
    void* p = mmap(nullptr, size, PROT_READ | (writable || private_copy ? PROT_WRITE : 0),
                   private_copy ? MAP_PRIVATE : MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED)
        detail::throw_error("mmap", -errno, std::string(domain->provider()),
                            fmt::format("mapping {} ({} B)", path, size));
    std::shared_ptr<std::byte[]> owned(static_cast<std::byte*>(p),
                                       [size](std::byte* q) { munmap(q, size); });
    auto mr = std::make_shared<MemoryRegion>(Private{}, std::move(domain),
                                             std::span(owned.get(), size), access, owned);
    mr->read_only_ = !writable;
    mr->register_with(bind_to);
    return mr;
}

int MemoryRegion::numa_node() const noexcept
{
    int node = -1;
    if (get_mempolicy(&node, nullptr, 0, memory_.data(), MPOL_F_NODE | MPOL_F_ADDR) != 0)
        return -1;
    return node;
}

void MemoryRegion::register_with(const Endpoint* bind_to)
{
    const std::uint64_t mode = domain_->mr_mode();
    const auto prov = domain_->provider();

    // Local roles are always granted; remote access only as asked. On iWARP the
    // sink of an RDMA read is written by the peer's read response, so it needs
    // remote-write access too (libfabric#1707, #3521).
    // A region exported read-only stays read-only on iWARP too: it cannot be
    // the sink of this side's own reads (that would need remote write).
    const bool iwarp_sink = domain_->quirks().read_sink_needs_remote_write;
    const bool exported_read_only = access_ == Access::remote_read;
    std::uint64_t flags = read_only_ ? FI_SEND | FI_WRITE : FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    if (iwarp_sink && exported_read_only)
        flags &= ~std::uint64_t{FI_READ}; // verbs adds remote write to FI_READ on iWARP
    if (access_ == Access::remote_read || access_ == Access::remote_read_write)
        flags |= FI_REMOTE_READ;
    if (access_ == Access::remote_write || access_ == Access::remote_read_write)
        flags |= FI_REMOTE_WRITE;
    if (iwarp_sink && !read_only_ && !exported_read_only)
        flags |= FI_REMOTE_WRITE;

    iovec iov{memory_.data(), memory_.size()};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = flags;
    attr.offset = 0;
    requested_key_ = !(mode & FI_MR_PROV_KEY);
    attr.requested_key = requested_key_ ? domain_->reserve_key() : 0;
    if (mode & FI_MR_ENDPOINT && !bind_to) {
        if (requested_key_)
            domain_->release_key(attr.requested_key);
        throw UsageError("fi_mr_regattr", -FI_EINVAL, std::string(prov),
                         fmt::format("{} wants endpoint-bound memory regions (FI_MR_ENDPOINT): "
                                     "register through Connection::register_memory or pass the "
                                     "endpoint as bind_to",
                                     prov));
    }

    fid_mr* raw = nullptr;
    const int ret = fi_mr_regattr(domain_->get(), &attr, 0, &raw);
    if (ret != 0) {
        if (requested_key_)
            domain_->release_key(attr.requested_key);
        detail::throw_error("fi_mr_regattr", ret, prov,
                            fmt::format("registering {} B at {}: {}", memory_.size(),
                                        static_cast<const void*>(memory_.data()),
                                        memlock_text()));
    }
    fid_.reset(raw);
    if (mode & FI_MR_ENDPOINT) {
        detail::check(fi_mr_bind(raw, &bind_to->get()->fid, 0), "fi_mr_bind", prov);
        detail::check(fi_mr_enable(raw), "fi_mr_enable", prov);
    }
    key_ = fi_mr_key(raw);
    if (key_ == FI_KEY_NOTAVAIL)
        detail::throw_error("fi_mr_key", -FI_ENOKEY, prov,
                            "the provider needs raw keys larger than 64 bits (FI_MR_RAW), which "
                            "weft does not support");
    desc_ = fi_mr_desc(raw);
    if (access_ != Access::local && domain_->region_watcher() != nullptr) {
        watched_ = true;
        domain_->region_watcher()->registered(*this);
    }
}

void MemoryRegion::bad_slice(std::size_t offset, std::size_t len) const
{
    check_live("MemoryRegion::slice");
    throw UsageError("MemoryRegion::slice", -FI_EINVAL, std::string(domain_->provider()),
                     fmt::format("local range [{}, +{}) is outside the {} B region", offset, len,
                                 memory_.size()));
}

RemoteRegion MemoryRegion::remote() const
{
    check_live("MemoryRegion::remote");
    std::uint8_t flags = 0;
    if (access_ == Access::remote_read || access_ == Access::remote_read_write)
        flags |= RemoteRegion::readable;
    if (access_ == Access::remote_write || access_ == Access::remote_read_write)
        flags |= RemoteRegion::writable;
    if (flags == 0)
        throw UsageError("MemoryRegion::remote", -FI_EINVAL, std::string(domain_->provider()),
                         "this region was registered with Access::local; register it with "
                         "Access::remote_read, remote_write or remote_read_write to export it");
    // Under FI_MR_VIRT_ADDR the target address is the virtual address; otherwise
    // it is an offset from the start of the region (libfabric#5102).
    const bool virt = domain_->mr_mode() & FI_MR_VIRT_ADDR;
    if (virt)
        flags |= RemoteRegion::virt_addr;
    const std::uint64_t base = virt ? reinterpret_cast<std::uintptr_t>(memory_.data()) : 0;
    return RemoteRegion(base, memory_.size(), key_, flags);
}

} // namespace weft
