// SPDX-License-Identifier: MIT
/// @brief Endpoint's data-path fast paths (write, read, write_inject,
/// write_notify and the post they share), inline like libfabric's own
/// fi_write(). Included by weft/fabric/endpoint.hpp; not a header of its own.
#pragma once

#include "weft/fabric/endpoint.hpp"

namespace weft {

// ---- The data path's fast paths, inline like libfabric's own fi_write():
// the call into libweft.so and its register spills cost more than weft's
// checks. Always inlined, also where the compiler would rather call: a Local
// is passed in memory, and the call costs ~11 instructions per post.
// Everything unusual (back-pressure, errors, odd lengths, completions that
// are not the awaited one) is out of line in src/fabric/endpoint_data.cpp. ----

// The call is a template argument and its arguments plain values, not a
// lambda: a closure is an object the compiler builds in memory before the call
// (a retry needs it again), ~12 stores per post; plain arguments stay in
// registers and are only spilled on the cold path.
template <auto Fn, class... A>
void Endpoint::post_retry(const char* call, fi_addr_t dest, ssize_t first, A... args)
{
    auto again = [&] { return Fn(ep_.get(), args...); };
    using Again = decltype(again);
    post_slow(call, dest, first, [](void* p) -> ssize_t { return (*static_cast<Again*>(p))(); },
              &again);
}

namespace detail {
/// Whether libfabric's `Fn` posts an RMA write (Endpoint::writes_posted counts them).
template <auto Fn>
inline constexpr bool posts_write = false;
template <>
inline constexpr bool posts_write<&fi_write> = true;
template <>
inline constexpr bool posts_write<&fi_writev> = true;
template <>
inline constexpr bool posts_write<&fi_writemsg> = true;
template <>
inline constexpr bool posts_write<&fi_inject_write> = true;
template <>
inline constexpr bool posts_write<&fi_writedata> = true;
template <>
inline constexpr bool posts_write<&fi_inject_writedata> = true;
} // namespace detail

template <auto Fn, class... A>
[[gnu::always_inline]] inline void Endpoint::post(const char* call, fi_addr_t dest, A... args)
{
    fid_ep* ep = ep_.get();
    if (ep == nullptr) [[unlikely]]
        closed_error(call);
    const ssize_t r = Fn(ep, args...);
    if (r != 0) [[unlikely]]
        post_retry<Fn>(call, dest, r, args...);
    if constexpr (detail::posts_write<Fn>)
        ++writes_posted_;
}

[[gnu::always_inline]] inline void Endpoint::write(Local src, const RemoteRegion& dst,
                                                   std::uint64_t offset, void* context, Peer peer)
{
    const std::uint64_t addr = dst.write_address(offset, src.len);
    if (src.len - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("write", Op::write, src.len, context))
            return;
    last_write_ = {dst, offset, src.len};
    q_->keep_source(src); // checked for an inject too (revoked, another Node's)
    if (src.len <= inject_size_) {
        post<fi_inject_write>("fi_inject_write", peer.addr, src.addr, src.len, peer.addr, addr, dst.key());
        complete_locally(Op::write, context, src.len);
        return;
    }
    post<fi_write>("fi_write", peer.addr, src.addr, src.len, src.desc, peer.addr, addr, dst.key(), context);
    ++q_->in_flight_;
}

[[gnu::always_inline]] inline bool Endpoint::write_injected(Local src, const RemoteRegion& dst,
                                                            std::uint64_t offset, Peer peer)
{
    if (src.len > inject_size_ || src.len == 0)
        return false;
    const std::uint64_t addr = dst.write_address(offset, src.len);
    last_write_ = {dst, offset, src.len};
    q_->keep_source(src); // checked as write() checks it (revoked, another Node's)
    post<fi_inject_write>("fi_inject_write", peer.addr, src.addr, src.len, peer.addr, addr, dst.key());
    return true;
}

[[gnu::always_inline]] inline void Endpoint::read(Local dst, const RemoteRegion& src,
                                                  std::uint64_t offset, void* context, Peer peer)
{
    const std::uint64_t addr = src.read_address(offset, dst.len);
    if (dst.len - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("read", Op::read, dst.len, context))
            return;
    q_->keep_sink(dst);
    if (!unflushed_peers_.empty()) [[unlikely]]
        flush_before_read(src, offset, peer);
    post<fi_read>("fi_read", peer.addr, dst.addr, dst.len, dst.desc, peer.addr, addr, src.key(), context);
    ++q_->in_flight_;
}

[[gnu::always_inline]] inline void Endpoint::write_inject(std::span<const std::byte> src,
                                                          const RemoteRegion& dst,
                                                          std::uint64_t offset, Peer peer)
{
    if (src.size() > inject_size_) [[unlikely]]
        inject_too_big(src.size());
    const std::uint64_t addr = dst.write_address(offset, src.size());
    post<fi_inject_write>("fi_inject_write", peer.addr, src.data(), src.size(), peer.addr, addr, dst.key());
}

[[gnu::always_inline]] inline void Endpoint::write_notify(Local src, const RemoteRegion& dst,
                                                          std::uint64_t offset, std::uint32_t value,
                                                          void* context, Peer peer)
{
    const std::uint64_t addr = dst.write_address(offset, src.len);
    if (src.len > max_transfer_) [[unlikely]]
        (void)odd_length("write_notify", Op::write, src.len, context);
    last_write_ = {dst, offset, src.len};
    if (framed_) [[unlikely]] { // no CQ data: a write and a message
        write_notify_framed(src, addr, dst.key(), value, context, peer);
        return;
    }
    q_->keep_source(src);
    if (src.len <= inject_size_) {
        post<fi_inject_writedata>("fi_inject_writedata", peer.addr, src.addr, src.len, value | notify_bits_,
                                  peer.addr, addr, dst.key());
        complete_locally(Op::write, context, src.len);
        if (queue_bypassing_reads_ && !unflushed(peer.addr)) // a read must not overtake it
            unflushed_peers_.push_back(peer.addr);                // (Quirks)
        return;
    }
    post<fi_writedata>("fi_writedata", peer.addr, src.addr, src.len, src.desc, value | notify_bits_,
                       peer.addr, addr, dst.key(), context);
    ++q_->in_flight_;
}

// ---- Small accessors and the completions' entry points, inline. ----

inline std::size_t Endpoint::read_iov_limit() const noexcept
{
    return quirks_.max_read_iov ? std::min(iov_limit_, quirks_.max_read_iov) : iov_limit_;
}

inline std::size_t Endpoint::read_ranges_limit() const noexcept
{
    return std::min({rma_iov_limit_, read_iov_limit(), max_iov});
}

inline Endpoint::Credits Endpoint::credits() const noexcept
{
    return {credits_.peer_slots(), credits_.sent(), credits_.on() ? credits_.returned() : 0,
            credits_.on() ? hello_.nudges : 0};
}

inline bool Endpoint::unflushed(fi_addr_t peer) const noexcept
{
    return std::find(unflushed_peers_.begin(), unflushed_peers_.end(), peer) !=
           unflushed_peers_.end();
}

inline std::size_t Endpoint::poll(std::span<Completion> out)
{
    if (ep_.closed()) [[unlikely]]
        closed_error("poll");
    return q_->poll(out);
}

inline std::optional<Completion> Endpoint::poll_one()
{
    if (ep_.closed()) [[unlikely]]
        closed_error("poll");
    return q_->poll_one();
}

inline Completion Endpoint::wait(void* context, Deadline deadline)
{
    if (ep_.closed()) [[unlikely]]
        closed_error("wait");
    return q_->wait(context, deadline);
}

inline Completion Endpoint::wait_for(Op op, Deadline deadline)
{
    if (ep_.closed()) [[unlikely]]
        closed_error("wait");
    return q_->wait_for(op, deadline);
}

} // namespace weft
