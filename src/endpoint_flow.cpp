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
#include "weft/error.hpp"

namespace weft {
namespace {

constexpr std::size_t credit_block = 4 + RemoteRegion::wire_size; // slots + counter region

std::uint64_t load_counter(std::byte* word) noexcept
{
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(word))
        .load(std::memory_order_acquire);
}

} // namespace

void Endpoint::send_hello()
{
    // weft's hello [credit block: slots u32, counter RemoteRegion] [id u32]
    std::byte* staging = nullptr;
    void* desc = nullptr;
    std::size_t len = frame::hello_size;
    if (credits_) {
        staging = control_mr_->data() + 8;
        desc = control_mr_->desc();
        std::memcpy(staging, frame::hello.data(), frame::hello_size);
        const auto slots = static_cast<std::uint32_t>(slots_.size());
        for (int i = 0; i < 4; ++i)
            staging[frame::hello_size + static_cast<std::size_t>(i)] =
                static_cast<std::byte>(slots >> (8 * i));
        const auto counter = control_mr_->remote().encode();
        std::memcpy(staging + frame::hello_size + 4, counter.data(), counter.size());
        len += credit_block;
    } else {
        staging = reinterpret_cast<std::byte*>(next_scratch());
        desc = scratch_mr_->desc();
        std::memcpy(staging, frame::hello.data(), frame::hello_size);
    }
    if (exchange_ids_) { // this side's id of the peer: the peer's notifications carry it
        for (int i = 0; i < 4; ++i)
            staging[len + static_cast<std::size_t>(i)] = static_cast<std::byte>(peer_.index >> (8 * i));
        len += 4;
    }
    if (framed_) {
        send_frame(frame::type_hello, 0, Local{staging, len, desc}, internal_ctx(), Peer{});
        return;
    }
    post<fi_send>("fi_send(hello)", staging, len, desc, FI_ADDR_UNSPEC, internal_ctx());
}

bool Endpoint::accept_hello(const std::byte* payload, std::size_t len)
{
    if (len < frame::hello_size || std::memcmp(payload, frame::hello.data(), frame::hello_size) != 0)
        return false;
    const std::size_t want = frame::hello_size + (credits_ ? credit_block : 0) + (exchange_ids_ ? 4 : 0);
    if (len < want)
        return false;
    if (exchange_ids_) {
        std::uint32_t id = 0;
        for (int i = 0; i < 4; ++i)
            id |= std::uint32_t(std::to_integer<std::uint8_t>(payload[want - 4 + static_cast<std::size_t>(i)])) << (8 * i);
        notify_bits_ = std::uint64_t{id} << 32;
    }
    if (!credits_)
        return true;
    const std::byte* block = payload + frame::hello_size;
    std::uint32_t slots = 0;
    for (int i = 0; i < 4; ++i)
        slots |= std::uint32_t(std::to_integer<std::uint8_t>(block[i])) << (8 * i);
    peer_slots_ = slots;
    peer_credit_ = RemoteRegion::decode(std::span(block + 4, RemoteRegion::wire_size));
    return slots > 0;
}

void Endpoint::expect_hello(Deadline deadline, bool initiator)
{
    // Where the acceptor may not see our hello until more data arrives
    // (Quirks::first_message_can_stall), the initiator sends a nudge after 20,
    // 200 and 1000 ms without the peer's hello. Each is a message like any
    // other: it spends a credit, and the peer's repost returns it.
    using namespace std::chrono_literals;
    constexpr std::array<std::chrono::milliseconds, frame::max_nudges> nudge_at{20ms, 200ms, 1000ms};
    const bool nudge = initiator && credits_ && framed_ && quirks_.first_message_can_stall;
    const auto start = std::chrono::steady_clock::now();
    std::uint32_t nudges = 0;
    std::uint32_t spins = 0;
    while (awaiting_hello_) {
        q_->stash_some();
        if ((++spins & 255u) != 0)
            continue;
        if (deadline.expired())
            detail::throw_error("connect", -FI_ETIMEDOUT, provider(),
                                "connected, but the peer never sent weft's hello: is it a weft "
                                "peer of the same version?");
        if (nudge && nudges < nudge_at.size() &&
            std::chrono::steady_clock::now() - start >= nudge_at[nudges]) {
            send_frame(frame::type_nudge, 0, Local{}, internal_ctx(), Peer{});
            ++sent_;
            ++nudges;
        }
    }
}

Endpoint::Credits Endpoint::credits() const noexcept
{
    if (!credits_)
        return {0, 0, 0};
    return {peer_slots_, sent_, load_counter(control_mr_->data())};
}

void Endpoint::take_credit()
{
    if (!credits_)
        return;
    if (sent_ < peer_slots_ + load_counter(control_mr_->data())) [[likely]] {
        ++sent_;
        return;
    }
    const auto deadline = Deadline::after(post_timeout_);
    std::uint32_t spins = 0;
    while (sent_ >= peer_slots_ + load_counter(control_mr_->data())) {
        q_->stash_some();
        if ((++spins & 255u) == 0 && deadline.expired())
            detail::throw_error(
                "send", -FI_ETIMEDOUT, provider(),
                fmt::format("all {} of the peer's receive slots are in use and it has freed none "
                            "for {} ms: it must poll its endpoint (messages are held until it "
                            "does; on this transport a message without a posted receive would "
                            "kill the connection)",
                            peer_slots_,
                            std::chrono::duration_cast<std::chrono::milliseconds>(post_timeout_)
                                .count()));
    }
    ++sent_;
}

void Endpoint::grant_credits()
{
    const std::uint64_t threshold = std::max<std::uint64_t>(1, slots_.size() / 4);
    if (!credits_ || granting_ || reposted_ - granted_ < threshold)
        return;
    granting_ = true; // post() may progress, which may come back here
    auto* value = next_scratch();
    value->operand = reposted_;
    const std::uint64_t addr = peer_credit_.write_address(0, sizeof(std::uint64_t));
    post<fi_write>("fi_write(credits)", &value->operand, sizeof(std::uint64_t), scratch_mr_->desc(), FI_ADDR_UNSPEC, addr, peer_credit_.key(), internal_ctx());
    granted_ = reposted_;
    granting_ = false;
}

} // namespace weft
