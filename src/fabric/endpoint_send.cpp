// SPDX-License-Identifier: MIT
// The message side of the data path: sends, notes (a notification with a
// payload), and weft's framing where the provider has no CQ data.
#include <array>
#include <cstring>

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "frame.hpp"
#include "check.hpp"
#include "getinfo.hpp"
#include "weft/fabric/endpoint.hpp"
#include "waits.hpp"
#include "weft/base/error.hpp"

namespace weft {

void Endpoint::check_message(std::size_t len) const
{
    if (len > max_message_)
        throw UsageError("send", -FI_EMSGSIZE, std::string(provider()),
                         fmt::format("a {} B message exceeds the peer's {} B receive slots: raise "
                                     "Options::slot_size on both sides, or move the data with RMA",
                                     len, max_message_));
}

void Endpoint::send(Local src, void* context, Peer peer)
{
    check_message(src.len);
    take_credit();
    if (framed_) {
        send_frame(frame::type_message, 0, src, context, peer);
        return;
    }
    q_->keep_source(src); // an inject's too (revoked, another Node's)
    if (send_bits_) { // the sender named in CQ data (Quirks::message_source_unreliable)
        post<fi_senddata>("fi_senddata", peer.addr, src.addr, src.len, src.desc, send_bits_, peer.addr,
                          context);
        ++q_->in_flight_;
        return;
    }
    if (src.len <= inject_size_) {
        post<fi_inject>("fi_inject", peer.addr, src.addr, src.len, peer.addr);
        complete_locally(Op::send, context, src.len);
        return;
    }
    post<fi_send>("fi_send", peer.addr, src.addr, src.len, src.desc, peer.addr, context);
    ++q_->in_flight_;
}

void Endpoint::send_note(std::uint32_t value, Local payload, void* context, Peer peer)
{
    check_message(payload.len + (framed_ ? 0 : frame::header_size));
    take_credit();
    if (framed_) {
        send_frame(frame::type_note, value, payload, context, peer);
        return;
    }
    auto* header = reinterpret_cast<std::byte*>(scratch_.next());
    wire::Placer(std::span(header, frame::header_size)).u32(value).u32(0);
    std::array<iovec, 2> iov{iovec{header, frame::header_size}, iovec{payload.addr, payload.len}};
    std::array<void*, 2> desc{scratch_.desc(), payload.desc};
    if (payload.len)
        q_->keep_source(payload);
    fi_msg msg{iov.data(), desc.data(), payload.len ? 2u : 1u, peer.addr, context,
               notify_bits_ | frame::note_marker};
    post<fi_sendmsg>("fi_sendmsg", msg.addr, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA);
    q_->in_flight_ += q_->ours(context) ? 0 : 1;
}

void Endpoint::write_delivered(Local src, const RemoteRegion& dst, std::uint64_t offset,
                               void* context, Peer peer)
{
    write_flagged(src, dst, offset, context, peer, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

void Endpoint::write_more(Local src, const RemoteRegion& dst, std::uint64_t offset, void* context,
                          Peer peer)
{
    write_flagged(src, dst, offset, context, peer, FI_MORE | FI_COMPLETION);
}

void Endpoint::write_flagged(Local src, const RemoteRegion& dst, std::uint64_t offset,
                             void* context, Peer peer, std::uint64_t flags)
{
    const std::uint64_t addr = dst.write_address(offset, src.len);
    if (src.len - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("write", Op::write, src.len, context))
            return;
    last_write_ = {dst, offset, src.len};
    q_->keep_source(src);
    iovec iov{src.addr, src.len};
    fi_rma_iov rma{addr, src.len, dst.key()};
    fi_msg_rma msg{&iov, &src.desc, 1, peer.addr, &rma, 1, context, 0};
    if (ep_.closed()) [[unlikely]]
        closed_error("write");
    const ssize_t r = fi_writemsg(ep_.get(), &msg, flags);
    if (r == -FI_EAGAIN) // a full queue while a chain is held back never drains: flush it
        post<fi_writemsg>("fi_writemsg", msg.addr, &msg, flags & ~std::uint64_t{FI_MORE});
    else if (r != 0)
        detail::throw_error("fi_writemsg", static_cast<int>(r), provider());
    ++q_->in_flight_;
}

void Endpoint::send_frame(std::uint8_t type, std::uint32_t value, Local payload, void* context,
                          Peer peer)
{
    auto* header = reinterpret_cast<std::byte*>(scratch_.next());
    frame::write_header(header, type, value);
    std::array<iovec, 2> iov{iovec{header, frame::header_size}, iovec{payload.addr, payload.len}};
    std::array<void*, 2> desc{scratch_.desc(), payload.desc};
    const std::size_t count = payload.len ? 2 : 1;
    if (payload.len)
        q_->keep_source(payload);
    fi_msg msg{iov.data(), desc.data(), count, peer.addr, context, 0};
    post<fi_sendmsg>("fi_sendmsg", msg.addr, &msg, FI_COMPLETION);
    q_->in_flight_ += q_->ours(context) ? 0 : 1;
}

} // namespace weft
