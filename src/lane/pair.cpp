// SPDX-License-Identifier: MIT
#include "pair.hpp"

#include <sys/uio.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "errors.hpp"
#include "wire.hpp"
#include "weft/base/error.hpp"

namespace weft::lane {
namespace {

// Control messages: a 4-byte tag, then little-endian fields.
constexpr std::string_view hello_tag = "WFLH";
constexpr std::string_view offer_tag = "WFLO";
constexpr std::string_view withdraw_tag = "WFLW";
constexpr std::string_view offered_tag = "WFLR"; // every region there was is offered
constexpr std::string_view fabric_tag = "WFLF";  // libfabric carries some of this side's too
// 2: the hello carries the probe's address; 3: say_fabric
constexpr std::uint8_t version = 3;

// What a peer reads with process_vm_readv at the hello, to learn whether the
// kernel lets it copy to and from this process (the ptrace check).
constexpr std::uint64_t probe_magic = 0x65626f7250746657; // "WftProbe"
alignas(8) const volatile std::uint64_t probe_word = probe_magic;

enum OfferFlags : std::uint8_t { readable_bit = 1, writable_bit = 2, memory_bit = 4 };

Deadline now() { return Deadline::after(std::chrono::nanoseconds(0)); }

[[noreturn]] void refuse(std::uint64_t key, const std::string& why)
{
    throw UsageError("lane", -EINVAL, "",
                     fmt::format("the co-located peer's region with key {:#x}: {}. Check the "
                                 "RemoteRegion: it must be one the peer gave, of a region it "
                                 "still has",
                                 key, why));
}

std::string_view tag_of(std::span<const std::byte> b)
{
    return b.size() < 4 ? std::string_view{}
                        : std::string_view(reinterpret_cast<const char*>(b.data()), 4);
}

} // namespace

Pair Pair::start(UnixChannel channel, std::uint64_t my_instance, pid_t expected_pid,
                 std::uint32_t ring_slots, Deadline deadline, bool say_hello)
{
    const Credentials who = channel.peer();
    if (expected_pid != 0 && who.pid != expected_pid)
        throw Error("lane", -EACCES, "",
                    fmt::format("the lane's peer is pid {}, where its address announced pid {}: "
                                "not the process that published the address",
                                who.pid, expected_pid));
    Pair p(std::move(channel), RingReceiver::create(ring_slots));
    p.peer_ = who;
    p.instance_ = my_instance;
    if (say_hello)
        p.hello(deadline);
    return p;
}

void Pair::hello(Deadline deadline)
{
    if (said_hello_)
        return;
    wire::Writer w;
    w.raw(hello_tag);
    w.u8(version);
    w.u64(instance_);
    w.u64(inbox_.segment().size());
    w.u64(reinterpret_cast<std::uintptr_t>(&probe_word));
    const std::array<int, 2> fds = {inbox_.segment().fd(), inbox_.wake_fd()};
    channel_.send(w.data(), fds, deadline);
    said_hello_ = true;
}

bool Pair::finish(Deadline deadline)
{
    if (outbox_)
        return true;
    auto m = channel_.receive(64, 2, deadline);
    if (!m)
        return false;
    if (tag_of(m->bytes) != hello_tag || m->fds.size() != 2)
        throw Error("lane", -EPROTO, "",
                    fmt::format("pid {} began the lane with something else than its hello",
                                peer_.pid));
    wire::Reader r(m->bytes, "lane hello", "lane");
    r.raw(4);
    if (const auto v = r.u8(); v != version)
        throw Error("lane", -EPROTO, "",
                    fmt::format("pid {} speaks lane version {} (this weft: {}): run the same weft "
                                "on both sides",
                                peer_.pid, v, version));
    peer_instance_ = r.u64();
    const std::uint64_t ring_bytes = r.u64();
    const std::uint64_t probe_at = r.u64();
    r.finish();
    outbox_.emplace(RingSender::attach(std::move(m->fds[0]), ring_bytes, std::move(m->fds[1])));
    seen_generation_ = outbox_->generation();
    // The kernel's ptrace check, once: where it refuses, only the segments the
    // peer maps for this side are the lane's (Node::path says so).
    std::uint64_t got = 0;
    iovec local{&got, sizeof got};
    iovec remote{reinterpret_cast<void*>(probe_at), sizeof got};
    if (::process_vm_readv(peer_.pid, &local, 1, &remote, 1, 0) != sizeof got) {
        const int e = errno;
        cross_copy_refused_ =
            e == EPERM ? fmt::format("the kernel refuses process_vm_* to pid {} (ptrace "
                                     "permission: another user, Yama's ptrace_scope, or the peer "
                                     "made itself non-dumpable)",
                                     peer_.pid)
                       : fmt::format("process_vm_readv of pid {} failed: {}", peer_.pid,
                                     std::strerror(e));
    } else if (got != probe_magic)
        cross_copy_refused_ = fmt::format("pid {} did not hold its probe word where its hello "
                                          "said",
                                          peer_.pid);
    return true;
}

Pair Pair::open(UnixChannel channel, std::uint64_t my_instance, pid_t expected_pid,
                std::uint32_t ring_slots, Deadline deadline)
{
    Pair p = start(std::move(channel), my_instance, expected_pid, ring_slots, deadline);
    if (!p.finish(deadline))
        throw TimeoutError("lane", -ETIMEDOUT, "",
                           fmt::format("pid {} sent no lane hello by the deadline", p.peer_.pid));
    return p;
}

void Pair::offer(const Offer& o, const Segment* memory, Deadline deadline)
{
    std::uint64_t in_segment = 0;
    if (memory != nullptr) {
        const auto base = reinterpret_cast<std::uintptr_t>(memory->data());
        if (!memory->owner() || !memory->sealed() || o.address < base ||
            o.length > memory->size() || o.address - base > memory->size() - o.length)
            throw UsageError("lane", -EINVAL, "",
                             "a region offered with a segment must lie in that segment, which "
                             "this process owns and has sealed");
        in_segment = o.address - base;
    }
    wire::Writer w;
    w.raw(offer_tag);
    w.u64(o.key);
    w.u64(o.address);
    w.u64(o.length);
    w.u8(static_cast<std::uint8_t>((o.readable ? readable_bit : 0) |
                                   (o.writable ? writable_bit : 0) |
                                   (memory != nullptr ? memory_bit : 0)));
    w.u64(in_segment);
    w.u64(memory != nullptr ? memory->size() : 0);
    const int fd = memory != nullptr ? memory->fd() : -1;
    channel_.send(w.data(), memory != nullptr ? std::span<const int>(&fd, 1) : std::span<const int>{},
                  deadline);
}

void Pair::withdraw(std::uint64_t key, Deadline deadline)
{
    wire::Writer w;
    w.raw(withdraw_tag);
    w.u64(key);
    channel_.send(w.data(), {}, deadline);
    inbox_.bump_generation(); // after the message: the peer that sees it finds it
}

void Pair::offered(Deadline deadline)
{
    channel_.send(std::as_bytes(std::span(offered_tag)), {}, deadline);
}

bool Pair::say_fabric(Deadline deadline)
{
    if (std::exchange(said_fabric_, true))
        return true;
    try {
        channel_.send(std::as_bytes(std::span(fabric_tag)), {}, deadline);
        return true;
    } catch (const Error&) {
        return false; // the peer's end is gone: the Node learns it from the channel
    }
}

void Pair::tend()
{
    if (!outbox_)
        finish(now());
    while (auto m = channel_.receive(64, 1, now()))
        handle(*m);
}

void Pair::handle(UnixChannel::Message& m)
{
    const std::string_view tag = tag_of(m.bytes);
    wire::Reader r(m.bytes, "lane control message", "lane");
    r.raw(std::min<std::size_t>(4, m.bytes.size()));
    if (tag == withdraw_tag) {
        last_ = nullptr;
        regions_.erase(r.u64());
        return;
    }
    if (tag == offered_tag) {
        all_offered_ = true;
        return;
    }
    if (tag == fabric_tag) {
        peer_uses_fabric_ = true;
        return;
    }
    if (tag != offer_tag)
        throw Error("lane", -EPROTO, "",
                    fmt::format("pid {} sent a lane control message of no known kind", peer_.pid));
    Mapped mapped;
    Offer& o = mapped.offer;
    o.key = r.u64();
    o.address = r.u64();
    o.length = r.u64();
    const std::uint8_t flags = r.u8();
    const std::uint64_t in_segment = r.u64();
    const std::uint64_t segment_size = r.u64();
    r.finish();
    o.readable = flags & readable_bit;
    o.writable = flags & writable_bit;
    mapped.owner_address = o.address;
    if ((flags & memory_bit) != 0) {
        if (m.fds.size() != 1 || in_segment > segment_size || o.length > segment_size - in_segment)
            throw Error("lane", -EPROTO, "",
                        fmt::format("pid {} offered region {:#x} with a malformed segment",
                                    peer_.pid, o.key));
        mapped.memory = std::make_unique<Segment>(
            Segment::map(std::move(m.fds[0]),
                         o.writable ? PeerAccess::read_write : PeerAccess::read, segment_size));
        // From here on the region's address is this side's mapping of it.
        o.address = reinterpret_cast<std::uintptr_t>(mapped.memory->data()) + in_segment;
    }
    last_ = nullptr; // a key offered again maps anew
    regions_.insert_or_assign(o.key, std::move(mapped));
}

bool Pair::knows(std::uint64_t key)
{
    seen_generation_ = outbox_->generation();
    tend();
    return regions_.contains(key);
}

const Pair::Mapped& Pair::region_slow(std::uint64_t key, const char* op)
{
    // The generation first: a withdrawal sent before it changed is on the channel.
    seen_generation_ = outbox_->generation();
    tend(); // and an offer may be on its way: sent before its key could be handed out
    // The peer's first offers (every region it had when the pair began) may
    // still be on their way after its hello: they end with a marker.
    for (const Deadline until = Deadline::after(std::chrono::seconds(5));
         !all_offered_ && !regions_.contains(key) && !until.expired();)
        if (auto m = channel_.receive(64, 1, until))
            handle(*m);
    const auto it = regions_.find(key);
    if (it == regions_.end())
        refuse(key, fmt::format("pid {} offers no such region to {} (never registered, or "
                                "revoked)",
                                peer_.pid, op));
    return it->second;
}

void Pair::copy_failed(const char* call, const Mapped& m, std::uint64_t offset, std::size_t len)
{
    const int e = errno;
    if (e == ESRCH)
        throw Error(call, -e, "", fmt::format("pid {} has gone", peer_.pid), nullptr, true);
    if (e == EPERM)
        throw Error(call, -e, "",
                    fmt::format("the kernel refuses copying to or from pid {} (ptrace permission: "
                                "another user, Yama's ptrace_scope, or the peer made itself "
                                "non-dumpable)",
                                peer_.pid));
    throw Error(call, -e, "",
                fmt::format("[{:#x}, +{}) of pid {}'s region {:#x}: {} (it is not mapped there, "
                            "or not writable)",
                            m.offer.address + offset, len, peer_.pid, m.offer.key,
                            std::strerror(e)));
}

void Pair::refuse_position(const Mapped& m, std::uint64_t key, std::uint64_t at, std::size_t len,
                           bool write)
{
    const bool allowed = write ? m.offer.writable : m.offer.readable;
    refuse(key, fmt::format("a {} of [{}, +{}) {} {}{} B region", write ? "write" : "read", at, len,
                            write ? "to" : "from",
                            allowed ? "its " : write ? "its read-only " : "its unreadable ",
                            m.offer.length));
}

void Pair::cross_copy(const Mapped& m, std::uint64_t at, std::byte* here, std::size_t len,
                      bool write)
{
    iovec local{here, len};
    iovec remote{reinterpret_cast<void*>(m.offer.address + at), len};
    while (remote.iov_len > 0) { // the kernel may copy less than asked: go on from there
        const ssize_t n = write ? ::process_vm_writev(peer_.pid, &local, 1, &remote, 1, 0)
                                : ::process_vm_readv(peer_.pid, &local, 1, &remote, 1, 0);
        if (n <= 0)
            copy_failed(write ? "process_vm_writev" : "process_vm_readv", m, at, len);
        const auto moved = static_cast<std::size_t>(n);
        local.iov_base = static_cast<std::byte*>(local.iov_base) + moved;
        local.iov_len -= moved;
        remote.iov_base = static_cast<std::byte*>(remote.iov_base) + moved;
        remote.iov_len -= moved;
    }
}

void Pair::copy_other(const Mapped& m, std::uint64_t at, std::byte* here, std::size_t len,
                      bool write)
{
    if (len == 0)
        return; // checked, and nothing to copy (memcpy wants no null source)
    if (m.memory) {
        auto* there = reinterpret_cast<std::byte*>(m.offer.address + at);
        std::memcpy(write ? there : here, write ? here : there, len);
        return;
    }
    cross_copy(m, at, here, len, write);
}

} // namespace weft::lane
