// SPDX-License-Identifier: MIT
// Memory a co-located peer maps: a memfd, mapped MAP_SHARED here, handed to
// the peer as a descriptor (UnixChannel::send), sealed so that the kernel
// enforces what the owner exported (docs/same-host-lane.md has the table
// measured on this kernel):
//  - F_SEAL_SHRINK | F_SEAL_GROW from the start: no peer can truncate the
//    memory under the owner (a SIGBUS here) or grow it;
//  - F_SEAL_FUTURE_WRITE when peers may only read: every later writable
//    mapping, write() and reopening through /proc fails, while the owner's own
//    mapping keeps writing;
//  - F_SEAL_SEAL last, so a peer cannot add seals of its own.
// The owner's mapping is MADV_DONTFORK: a child forked later does not inherit
// a writable mapping the seals cannot reach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "weft/base/detail/fd.hpp"

namespace weft::lane {

enum class PeerAccess : std::uint8_t { read, read_write };

class Segment {
public:
    /// The owner's side: `size` bytes (rounded up to whole pages) of zeroed
    /// memory. `name` shows in /proc/<pid>/fd and maps ("memfd:weft-NAME").
    static Segment create(std::size_t size, std::string_view name);
    /// The peer's side: maps the descriptor an owner sent. Refused (UsageError
    /// naming the defect) when the owner can still shrink it (this process
    /// would take a SIGBUS), when it is not `size` bytes, or when `access` asks
    /// to write memory exported read-only.
    static Segment map(detail::Fd fd, PeerAccess access, std::size_t size);

    Segment() noexcept = default;
    Segment(Segment&& other) noexcept;
    Segment& operator=(Segment&& other) noexcept;
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment();

    /// Owner: what peers may do, sealed for good (once; a second call throws).
    void seal(PeerAccess peers);
    /// Owner: cuts every peer off. The bytes move to fresh memory mapped at
    /// the same addresses, so pointers into the segment stay valid; peers'
    /// mappings keep the old pages, which nothing here reads or writes again.
    /// The descriptor changes (unsealed, as after create); this process's
    /// own threads must not write the segment meanwhile.
    void detach_peers();

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
    /// The memfd, to send to a peer (the owner's), or the one mapped (a peer's).
    int fd() const noexcept { return fd_.get(); }
    bool owner() const noexcept { return owner_; }
    bool sealed() const noexcept { return sealed_; }
    /// What seal() let peers do (read until sealed).
    PeerAccess peers() const noexcept { return peers_; }

private:
    detail::Fd fd_;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::string name_;
    bool owner_ = false;
    bool sealed_ = false;
    PeerAccess peers_ = PeerAccess::read;
};

} // namespace weft::lane
