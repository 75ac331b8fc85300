// SPDX-License-Identifier: MIT
// Connection handshake and flow control of MSG endpoints.
//
// The connection initiator sends weft's hello first (iWARP requires it). Where
// a message that finds no posted receive is fatal (iWARP has no
// receiver-not-ready retry, and siw answers with a TERMINATE), both hellos also
// carry the sender's receive-slot count and a RemoteRegion of an 8-byte counter:
// each side writes, by RMA, how many slots it has reposted into the other's
// counter, and sends only while it has slots to spend. RMA writes consume no
// receive, so the credit returns can never deadlock.
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "frame.hpp"
#include "check.hpp"
#include "wire.hpp"
#include "weft/fabric/endpoint.hpp"
#include "waits.hpp"
#include "weft/base/error.hpp"

namespace weft {
namespace detail {

void CreditWindow::open(const std::shared_ptr<Domain>& domain, const Endpoint* owner)
{
    mr_ = MemoryRegion::allocate(domain, 64, Access::remote_write, owner);
}

std::uint64_t CreditWindow::returned() const noexcept
{
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(mr_->data()))
        .load(std::memory_order_acquire);
}

void CreditWindow::encode_block(std::byte* out, std::uint32_t own_slots) const
{
    wire::Placer(std::span(out, block_size)).u32(own_slots).raw(mr_->remote().encode());
}

bool CreditWindow::decode_block(const std::byte* block)
{
    peer_slots_ = static_cast<std::uint32_t>(wire::get_le(block, 4));
    peer_counter_ = RemoteRegion::decode(std::span(block + 4, RemoteRegion::wire_size));
    return peer_slots_ > 0;
}

} // namespace detail

void Endpoint::send_hello()
{
    // weft's hello [credit block: slots u32, counter RemoteRegion] [id u32]
    std::byte* staging = nullptr;
    void* desc = nullptr;
    std::size_t len = frame::hello_size;
    if (credits_.on()) {
        staging = credits_.staging();
        desc = credits_.desc();
        std::memcpy(staging, frame::hello.data(), frame::hello_size);
        credits_.encode_block(staging + len, static_cast<std::uint32_t>(slots_.count()));
        len += detail::CreditWindow::block_size;
    } else {
        staging = reinterpret_cast<std::byte*>(scratch_.next());
        desc = scratch_.desc();
        std::memcpy(staging, frame::hello.data(), frame::hello_size);
    }
    if (hello_.exchange_ids) { // this side's id of the peer: the peer's notifications carry it
        wire::put_le(staging + len, peer_.index, 4);
        len += 4;
    }
    if (framed_) {
        send_frame(frame::type_hello, 0, Local{staging, len, desc}, internal_ctx(), Peer{});
        return;
    }
    post<fi_send>("fi_send(hello)", FI_ADDR_UNSPEC, staging, len, desc, FI_ADDR_UNSPEC, internal_ctx());
}

bool Endpoint::accept_hello(const std::byte* payload, std::size_t len)
{
    if (len < frame::hello_size || std::memcmp(payload, frame::hello.data(), frame::hello_size) != 0)
        return false;
    const std::size_t want = frame::hello_size +
                             (credits_.on() ? detail::CreditWindow::block_size : 0) +
                             (hello_.exchange_ids ? 4 : 0);
    if (len < want)
        return false;
    if (hello_.exchange_ids)
        notify_bits_ = wire::get_le(payload + want - 4, 4) << 32;
    return !credits_.on() || credits_.decode_block(payload + frame::hello_size);
}

void Endpoint::nudge_if_due()
{
    // Where the acceptor may not see our hello until more data arrives
    // (Quirks::first_message_can_stall), the initiator sends a nudge after 20,
    // 200 and 1000 ms without the peer's hello. Each is a message like any
    // other: it spends a credit, and the peer's repost returns it.
    using namespace std::chrono_literals;
    constexpr std::array<std::chrono::milliseconds, frame::max_nudges> nudge_at{20ms, 200ms, 1000ms};
    if (!hello_.initiator || !hello_.connected || !hello_.awaiting || !credits_.on() || !framed_ ||
        !quirks_.first_message_can_stall || hello_.nudges >= nudge_at.size())
        return;
    if (std::chrono::steady_clock::now() - hello_.since < nudge_at[hello_.nudges])
        return;
    send_frame(frame::type_nudge, 0, Local{}, internal_ctx(), Peer{});
    credits_.spend();
    ++hello_.nudges;
}

void Endpoint::expect_hello(Deadline deadline, bool initiator)
{
    hello_.initiator = initiator;
    hello_.connected = true;
    hello_.since = std::chrono::steady_clock::now();
    detail::spin_until(
        deadline, [&] { return !hello_.awaiting; }, [&] { q_->stash_some(); },
        [&] {
            detail::throw_error("connect", -FI_ETIMEDOUT, provider(),
                                "connected, but the peer never sent weft's hello: is it a weft "
                                "peer of the same version?");
        },
        [&] { nudge_if_due(); });
}

void Endpoint::take_credit()
{
    if (!credits_.on() || credits_.try_take()) [[likely]]
        return;
    detail::spin_until(
        Deadline::after(post_timeout_), [&] { return credits_.try_take(); },
        [&] { q_->stash_some(); },
        [&] {
            detail::throw_error(
                "send", -FI_ETIMEDOUT, provider(),
                fmt::format("all {} of the peer's receive slots are in use and it has freed none "
                            "for {} ms: it must poll its endpoint (messages are held until it "
                            "does; on this transport a message without a posted receive would "
                            "kill the connection)",
                            credits_.peer_slots(),
                            std::chrono::duration_cast<std::chrono::milliseconds>(post_timeout_)
                                .count()));
        });
}

void Endpoint::grant_credits()
{
    const std::uint64_t count =
        credits_.grant_due(std::max<std::uint64_t>(1, slots_.count() / 4));
    if (granting_ || count == 0)
        return;
    granting_ = true; // post() may progress, which may come back here
    auto* value = scratch_.next();
    value->operand = count;
    const RemoteRegion& counter = credits_.peer_counter();
    const std::uint64_t addr = counter.write_address(0, sizeof(std::uint64_t));
    post<fi_write>("fi_write(credits)", FI_ADDR_UNSPEC, &value->operand, sizeof(std::uint64_t), scratch_.desc(),
                   FI_ADDR_UNSPEC, addr, counter.key(), internal_ctx());
    credits_.granted(count);
    granting_ = false;
}

} // namespace weft
