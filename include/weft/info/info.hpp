// SPDX-License-Identifier: MIT
/// @brief An owned fi_info entry and the attributes weft's behaviour follows:
/// the provider's name, endpoint kind, capabilities and Quirks (what weft papers
/// over, from providers/). select.hpp hands one out; every object opens from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <rdma/fabric.h>

#include "weft/base/detail/fid.hpp"

namespace weft {

/// The two endpoint kinds weft supports as first-class citizens.
enum class EndpointKind : std::uint8_t {
    msg, ///< connection-oriented (FI_EP_MSG): listen / accept / connect
    rdm, ///< reliable datagram (FI_EP_RDM) with an address vector, many peers
};

std::string_view to_string(EndpointKind kind) noexcept;

/// What fi_info's bits do not say about an endpoint, derived in providers/ from
/// the provider and its protocol (for example FI_PROTO_IWARP).
struct Quirks {
    /// iWARP: the sink of an RDMA read must be registered with remote-write access.
    bool read_sink_needs_remote_write = false;
    /// iWARP: the connection initiator must send the first message.
    bool initiator_sends_first = false;
    /// Largest completion queue the device allows (0 = no known limit).
    std::size_t max_cq_entries = 0;
    /// A passive RMA target needs someone to drive progress: data progress is
    /// MANUAL, or AUTO in name only (the provider moves data only when its CQ is read).
    bool target_needs_progress = false;
    /// The target's provider does not check keys on its fast RMA path (shm
    /// reads and writes peer memory directly): a wrong key is not detected.
    bool keys_unchecked = false;
    /// A refused RMA (wrong key, bounds, access) is dropped without an error
    /// completion: the initiator learns of it only from its deadline.
    bool remote_errors_silent = false;
    /// A refused RMA closes the connection it came on, and the RDM layer
    /// opens a new one for the next operation to that peer without a word: the
    /// refusal reaches only the operations in flight when the connection
    /// closed, and may be lost when the next one comes later (RDM over TCP:
    /// tcp;ofi_rxm and net, every time; verbs;ofi_rxm on iWARP, whose writes
    /// complete once sent, some of the time). The refused bytes never land.
    /// Test: "misuse: where RDM reconnects behind a refusal, it may be lost
    /// when the next operation comes after the reconnect".
    bool refusal_lost_on_reconnect = false;
    /// The provider advertises FI_ATOMIC but its fetch atomics are unusable;
    /// weft refuses them as unsupported.
    bool atomics_unreliable = false;
    /// A message that finds no posted receive kills the connection (iWARP has
    /// no receiver-not-ready retry): weft counts the peer's free receive slots.
    bool receiver_not_ready_fatal = false;
    /// Largest number of local segments an RMA read may scatter into (the
    /// device's max_sge_rd; 0 = the endpoint's iov_limit).
    std::size_t max_read_iov = 0;
    /// The provider sends the operand *pointers* of fetch / compare atomics as
    /// their values (libfabric 1.17 verbs MSG endpoints): weft passes values.
    bool atomic_operands_by_value = false;
    /// A peer that dies mid-stream can stall or poison an RDM endpoint it
    /// shared with other peers (shm keeps its unfinished commands at the head
    /// of the queue; sockets reports its broken connection as an error
    /// completion to whoever polls next): a Server gives each RDM connection its
    /// own endpoint. Test: "faults: a client killed mid-stream".
    bool dead_peer_blocks_endpoint = false;
    /// Some small RMA reads that cross a page boundary return wrong bytes for
    /// part of the range, and again when repeated, while the target memory is
    /// right (soft-iWARP). Not worked around yet: "soak: 10^5 random RMA
    /// writes and reads, every byte verified" counts them instead of failing.
    bool page_crossing_reads_unreliable = false;
    /// A write to a region exported read-only lands anyway: the layer
    /// registers core memory with local read access, which iWARP turns into
    /// remote write (ofi_rxm over iWARP). Test: "least privilege: a forged
    /// descriptor gets no more than was exported".
    bool read_only_unenforced = false;
    /// A peer killed while it held the lock of a shared-memory queue leaves it
    /// held: any later call into the provider that takes it spins forever, and
    /// no deadline reaches it (shm in libfabric 1.17; "faults: a peer killed
    /// mid-stream" kills one so). weft's own threads give up on such an
    /// endpoint (Endpoint::abandoned()); keep an application thread that may
    /// be stuck, and what it touches, alive.
    bool dead_peer_can_hang_calls = false;
    /// The first message of a new connection can sit unread at the acceptor
    /// until more data arrives (siw in Linux 6.1 hands the socket to the QP
    /// only after sending the MPA reply; data in between wakes nobody).
    /// weft's initiator nudges (below); every connection test on siw runs it.
    bool first_message_can_stall = false;
    /// A write_notify up to the inject size is queued for the target and
    /// reported complete at once, while an RMA read bypasses that queue, so a
    /// read right after it can return the old bytes (shm in libfabric 1.17).
    /// weft makes the first read after such a write wait for the queue
    /// (Endpoint::flush), keeping read-after-write: "contract: a completed
    /// write is seen by the read that follows it".
    bool reads_overtake_queued_writes = false;
    /// A read of more than one remote range (Endpoint::read_ranges) is carried
    /// out by the target's provider when it next progresses, where a read of one
    /// range is the initiator's system call alone (shm in libfabric 1.17: its
    /// fast path, cross-memory attach, takes one remote range). Correct, but it
    /// waits for the target; one range a read is faster there. Test: "progress:
    /// on shm a read of several ranges waits for the target, a read of one does
    /// not (Quirks::ranges_wait_for_target)".
    bool ranges_wait_for_target = false;
    /// RDM: FI_SOURCE names the wrong peer for a notification (ofi_rxm,
    /// ofi_rxd) or a message (ofi_rxd) in libfabric 1.17. A Node then
    /// carries the sender's identity itself, in the upper CQ-data bits ("node:
    /// every notification names the peer that sent it"; "node: every message
    /// names the peer that sent it").
    bool notify_source_unreliable = false;
    bool message_source_unreliable = false;
    /// The queue's wait descriptor does not turn readable when data arrives
    /// (ofi_rxm: its core connections' traffic does not reach it). Sleeping
    /// waits and progress threads then sleep at most 10 ms at a time there
    /// ("node sleep: a server with 8 idle peers uses no CPU while it waits").
    bool wait_fd_misses_data = false;
    /// A sleep on the queue's wait descriptor returns at once with nothing to
    /// read once connections carry traffic (net in libfabric 1.17: in 0-5 us, op
    /// after op). A sleeping wait that finds nothing after two such sleeps naps
    /// 1 ms, so it does not spin, and an answer waits for the nap's end: a
    /// round trip of two sleeping Nodes takes ~1.1 ms there, 20-40 us on tcp and
    /// sockets ("node sleep: a sleeping wait woken by its completion does not nap").
    bool wait_fd_stays_readable = false;
    /// RMA into this side's memory is carried out by the provider's code on
    /// this side as the peer's packets are read, the key checked once per
    /// operation (every provider but verbs): a write still queued here lands
    /// even after its region's registration is closed, e.g. a killed peer's.
    /// A region with remote access that weft allocated keeps its address
    /// range (not its pages) until its domain closes ("faults: a region
    /// dropped while a killed client's writes are still queued is never
    /// written after it is freed").
    bool rma_target_in_software = true;
    /// Packets one peer may have in flight before the provider can stall for
    /// good (0 = no such limit). ofi_rxd (libfabric 1.17, and its main branch
    /// in 2026) starts an operation posted while older ones wait for a full
    /// send window ahead of them, which can leave the window full of packets
    /// the peer cannot take while the ones it waits for are never sent. An
    /// operation takes about 1 + len / 1432 packets (a read, 1 here and its
    /// length in the peer's window); the window is the receiving side's
    /// FI_OFI_RXD_MAX_UNACKED (128 by default; this value is this process's).
    /// weft does not track this: stay below it, or raise it on both sides.
    /// Test: "contract: notifications are told from local completions with
    /// many in flight".
    std::size_t send_window_packets = 0;
};

/// One fi_info entry, owned (fi_freeinfo on destruction), copyable (fi_dupinfo).
class Info {
public:
    /// Takes ownership of `owned` (a single entry; `next` is ignored and freed with it).
    explicit Info(fi_info* owned) noexcept : p_(owned) {}
    /// Copies one entry of a list.
    static Info dup(const fi_info* entry);

    Info(const Info& other);
    Info& operator=(const Info& other);
    Info(Info&&) noexcept = default;
    Info& operator=(Info&&) noexcept = default;

    const fi_info* get() const noexcept { return p_.get(); }
    fi_info* get() noexcept { return p_.get(); }
    const fi_info* operator->() const noexcept { return p_.get(); }
    fi_info* operator->() noexcept { return p_.get(); }

    /// Full provider name as libfabric reports it, e.g. "tcp;ofi_rxm".
    std::string_view provider() const noexcept;
    std::string_view fabric_name() const noexcept;
    std::string_view domain_name() const noexcept;
    EndpointKind kind() const noexcept;

    std::uint64_t mr_mode() const noexcept
    {
        return static_cast<std::uint64_t>(static_cast<unsigned>(p_->domain_attr->mr_mode));
    }
    std::size_t cq_data_size() const noexcept { return p_->domain_attr->cq_data_size; }
    std::size_t inject_size() const noexcept { return p_->tx_attr->inject_size; }
    std::size_t max_msg_size() const noexcept { return p_->ep_attr->max_msg_size; }
    bool manual_progress() const noexcept
    {
        return p_->domain_attr->data_progress == FI_PROGRESS_MANUAL;
    }
    bool has_caps(std::uint64_t caps) const noexcept { return (p_->caps & caps) == caps; }

    /// One line: "tcp MSG fabric=127.0.0.1/32 domain=lo".
    std::string summary() const;
    /// The capability bits weft cares about, for reports: RMA, atomics,
    /// cq_data_size, mr_mode, progress, inject and max message size.
    std::string capabilities() const;

private:
    detail::InfoPtr p_;
};

/// Human-readable mr_mode bits: "VIRT_ADDR|PROV_KEY" or "none".
std::string mr_mode_string(std::uint64_t mr_mode);

/// The libfabric API version weft is written against.
inline constexpr std::uint32_t fi_api_version = FI_VERSION(1, 17);

} // namespace weft
