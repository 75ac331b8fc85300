// SPDX-License-Identifier: MIT
#include "segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "errors.hpp"
#include "weft/base/error.hpp"

namespace weft::lane {
namespace {

std::size_t whole_pages(std::size_t n)
{
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

detail::Fd new_memfd(const std::string& name, std::size_t size)
{
    detail::Fd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd)
        fail_errno("memfd_create", fmt::format("lane segment {}", name));
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
        fail_errno("ftruncate", fmt::format("lane segment {} to {} B", name, size));
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
        fail_errno("fcntl(F_ADD_SEALS)", fmt::format("lane segment {}", name));
    return fd;
}

std::byte* map_shared(int fd, std::size_t size, int prot, const std::string& what)
{
    void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        fail_errno("mmap", what);
    return static_cast<std::byte*>(p);
}

} // namespace

Segment Segment::create(std::size_t size, std::string_view name)
{
    if (size == 0)
        throw UsageError("lane", -EINVAL, "", "a lane segment of 0 B");
    Segment s;
    s.name_ = fmt::format("weft-{}", name);
    s.size_ = whole_pages(size);
    s.fd_ = new_memfd(s.name_, s.size_);
    s.data_ = map_shared(s.fd_.get(), s.size_, PROT_READ | PROT_WRITE,
                         fmt::format("lane segment {} ({} B)", s.name_, s.size_));
    s.owner_ = true;
    if (::madvise(s.data_, s.size_, MADV_DONTFORK) != 0)
        fail_errno("madvise(MADV_DONTFORK)", fmt::format("lane segment {}", s.name_));
    return s;
}

Segment Segment::map(detail::Fd fd, PeerAccess access, std::size_t size)
{
    const int seals = ::fcntl(fd.get(), F_GET_SEALS);
    if (seals < 0)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("the peer sent a descriptor that is not a sealable memfd ({})",
                                     std::strerror(errno)));
    constexpr int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    if ((seals & needed) != needed)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("the peer's segment is not sealed against shrinking, growing "
                                     "and new seals (seals {:#x}): its owner could truncate it and "
                                     "crash this process with SIGBUS",
                                     seals));
    if (access == PeerAccess::read_write && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
        throw UsageError("lane", -EACCES, "",
                         "the peer exported this segment read-only; it cannot be mapped to write");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0)
        fail_errno("fstat", "a peer's lane segment");
    if (static_cast<std::uint64_t>(st.st_size) != size || size == 0)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("the peer's segment holds {} B where {} B were announced",
                                     st.st_size, size));
    Segment s;
    s.name_ = "peer segment";
    s.size_ = size;
    const int prot = access == PeerAccess::read_write ? PROT_READ | PROT_WRITE : PROT_READ;
    s.data_ = map_shared(fd.get(), size, prot, fmt::format("a peer's lane segment ({} B)", size));
    s.fd_ = std::move(fd);
    s.sealed_ = true;
    return s;
}

Segment::Segment(Segment&& o) noexcept
    : fd_(std::move(o.fd_)), data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)), name_(std::move(o.name_)), owner_(o.owner_),
      sealed_(o.sealed_), peers_(o.peers_)
{
}

Segment& Segment::operator=(Segment&& o) noexcept
{
    if (this != &o) {
        this->~Segment();
        new (this) Segment(std::move(o));
    }
    return *this;
}

Segment::~Segment()
{
    if (data_ != nullptr)
        ::munmap(data_, size_);
}

void Segment::seal(PeerAccess peers)
{
    if (!owner_ || sealed_)
        throw UsageError("lane", -EINVAL, "",
                         fmt::format("lane segment {} is {}", name_,
                                     owner_ ? "sealed already" : "a peer's, not this process's"));
    const int seals = (peers == PeerAccess::read ? F_SEAL_FUTURE_WRITE : 0) | F_SEAL_SEAL;
    if (::fcntl(fd_.get(), F_ADD_SEALS, seals) != 0)
        fail_errno("fcntl(F_ADD_SEALS)", fmt::format("lane segment {}", name_));
    sealed_ = true;
    peers_ = peers;
}

void Segment::detach_peers()
{
    if (!owner_)
        throw UsageError("lane", -EINVAL, "",
                         "only the owner of a lane segment can detach its peers");
    detail::Fd fresh = new_memfd(name_, size_);
    std::byte* staged = map_shared(fresh.get(), size_, PROT_READ | PROT_WRITE,
                                   fmt::format("lane segment {} (detaching its peers)", name_));
    ::madvise(staged, size_, MADV_DONTFORK);
    std::memcpy(staged, data_, size_);
    // mremap moves the fresh pages over the old addresses in one step: no
    // moment where the addresses are unmapped for another thread to touch.
    void* moved = ::mremap(staged, size_, size_, MREMAP_MAYMOVE | MREMAP_FIXED, data_);
    if (moved == MAP_FAILED) {
        const int e = errno;
        ::munmap(staged, size_);
        errno = e;
        fail_errno("mremap", fmt::format("lane segment {} (detaching its peers)", name_));
    }
    fd_ = std::move(fresh);
    sealed_ = false;
}

} // namespace weft::lane
