// SPDX-License-Identifier: MIT
// The data path: posts, retries on back-pressure, and completion polling. No
// locks and no copies here; -FI_EAGAIN leaves the fast path for post_slow().
#include <array>
#include <cstring>

#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "frame.hpp"
#include "check.hpp"
#include "getinfo.hpp"
#include "weft/fabric/detail/ranges.hpp"
#include "weft/fabric/endpoint.hpp"
#include "waits.hpp"
#include "weft/base/error.hpp"

namespace weft {

void Endpoint::post_slow(const char* call, fi_addr_t dest, ssize_t r, ssize_t (*retry)(void*),
                         void* arg)
{
    std::optional<Deadline> deadline;
    for (std::uint32_t tries = 1; r == -FI_EAGAIN; ++tries) {
        // A peer known to be gone answers never: say so, not at the timeout.
        if (gone_check_ && tries % 64 == 0)
            if (const std::string* why = gone_check_(gone_owner_, *this, dest))
                throw Error(call, -FI_ECONNRESET, std::string(provider()),
                            fmt::format("the peer this post is for is lost ({})", *why),
                            nullptr, true);
        if (!deadline)
            deadline = Deadline::after(post_timeout_);
        else if (deadline->expired())
            detail::throw_error(
                call, -FI_ETIMEDOUT, provider(),
                fmt::format("the provider kept answering -FI_EAGAIN for {} ms: the transmit "
                            "queue (depth {}) stays full. Poll completions more often, keep fewer "
                            "operations in flight, or raise Options::tx_depth{}",
                            std::chrono::duration_cast<std::chrono::milliseconds>(post_timeout_)
                                .count(),
                            info()->tx_attr->size,
                            quirks_.target_needs_progress && kind_ == EndpointKind::rdm
                                ? ". Or the connection to the peer is still being set up: this "
                                  "provider moves data only while the peer reads its completion "
                                  "queue, so the peer must poll its endpoint or run a progress "
                                  "thread (Progress::automatic); or the peer is gone (exited, "
                                  "killed, unreachable)"
                                : ""));
        q_->stash_some(); // progress, keeping what completes for later polls
        r = retry(arg);
    }
    if (r != 0)
        detail::throw_error(call, static_cast<int>(r), provider());
}

std::size_t Endpoint::write_batch(std::span<const Write> writes, const RemoteRegion& dst,
                                  void* context, std::size_t signal_every, Peer peer)
{
    for (const Write& w : writes) {
        (void)dst.write_address(w.offset, w.src.len);
        q_->keep_source(w.src);
    }
    // Unsignaled writes hold transmit slots until a later signaled one
    // completes: signal at least every half queue.
    const std::size_t half_queue = std::max<std::size_t>(1, info()->tx_attr->size / 2);
    const std::size_t every = signal_every ? std::min(signal_every, half_queue) : half_queue;
    std::size_t signaled = 0;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        const Write& w = writes[i];
        const bool last = i + 1 == writes.size();
        const bool signal = last || (i + 1) % every == 0;
        // FI_INJECT only on unsignaled writes: some providers drop the
        // completion of an injected write that asked for one.
        const std::uint64_t flags = (last ? 0 : FI_MORE) | (signal ? FI_COMPLETION : 0) |
                                    (!signal && w.src.len <= inject_size_ ? FI_INJECT : 0);
        iovec iov{w.src.addr, w.src.len};
        void* desc = w.src.desc;
        fi_rma_iov rma{dst.write_address(w.offset, w.src.len), w.src.len, dst.key()};
        // Unsignaled writes carry weft's own context: tcp and net complete them
        // anyway, and those completions must not reach the caller.
        fi_msg_rma msg{&iov, &desc, 1, peer.addr, &rma, 1, signal ? context : internal_ctx(), 0};
        // A full queue while a chain is held back (FI_MORE) never drains:
        // retry without FI_MORE, which flushes what was chained so far.
        if (ep_.closed()) [[unlikely]]
            closed_error("write_batch");
        const ssize_t r = fi_writemsg(ep_.get(), &msg, flags);
        if (r == -FI_EAGAIN)
            post<fi_writemsg>("fi_writemsg", msg.addr, &msg, flags & ~FI_MORE);
        else if (r != 0)
            detail::throw_error("fi_writemsg", static_cast<int>(r), provider());
        signaled += signal;
        q_->in_flight_ += signal;
    }
    return signaled;
}

void Endpoint::writev(std::span<const Local> src, const RemoteRegion& dst, std::uint64_t offset,
                      void* context, Peer peer)
{
    if (src.empty() || src.size() > iov_limit_ || src.size() > max_iov)
        throw UsageError("writev", -FI_EINVAL, std::string(provider()),
                         fmt::format("{} local segments; this endpoint takes 1 to {}", src.size(),
                                     std::min(iov_limit_, max_iov)));
    std::array<iovec, max_iov> iov{};
    std::array<void*, max_iov> desc{};
    std::size_t total = 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
        iov[i] = {src[i].addr, src[i].len};
        desc[i] = src[i].desc;
        total += src[i].len;
    }
    fi_rma_iov rma{dst.write_address(offset, total), total, dst.key()};
    if (total - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("writev", Op::write, total, context))
            return;
    for (const Local& l : src)
        q_->keep_source(l);
    fi_msg_rma msg{iov.data(), desc.data(), src.size(), peer.addr, &rma, 1, context, 0};
    post<fi_writemsg>("fi_writemsg", msg.addr, &msg, FI_COMPLETION);
    ++q_->in_flight_;
}

void Endpoint::write_notify_framed(Local src, std::uint64_t addr, std::uint64_t key,
                                   std::uint32_t value, void* context, Peer peer)
{
    // No CQ data: the write, then a notify message the target turns into
    // Op::notify. The message must not overtake the data: ordered when the
    // provider promises send-after-write, else weft waits for delivery first.
    take_credit(); // before the write, so that a write is never left without its notify
    q_->keep_source(src);
    if (ordered_saw_) {
        post<fi_write>("fi_write", peer.addr, src.addr, src.len, src.desc, peer.addr, addr, key, internal_ctx());
    } else {
        iovec iov{src.addr, src.len};
        fi_rma_iov rma{addr, src.len, key};
        fi_msg_rma msg{&iov, &src.desc, 1, peer.addr, &rma, 1, fence_ctx(), 0};
        fence_done_ = false;
        post<fi_writemsg>("fi_writemsg", msg.addr, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
        await_fence(Deadline::after(post_timeout_), "the write before the notify message");
    }
    send_frame(frame::type_notify, value, Local{}, context, peer);
}

void Endpoint::await_fence(Deadline deadline, const char* what)
{
    detail::spin_until(
        deadline, [&] { return fence_done_; }, [&] { q_->stash_some(); },
        [&] {
            detail::throw_error(
                "wait", -FI_ETIMEDOUT, provider(),
                fmt::format("{} never completed{}", what,
                            quirks_.target_needs_progress
                                ? ": this provider moves data only while the peer reads its "
                                  "completion queue, so the peer must poll or run a progress "
                                  "thread (Progress::automatic); or the peer is gone"
                                : ": is the peer alive?"));
        });
}

void Endpoint::flush(const RemoteRegion& readable, Peer peer, Deadline deadline)
{
    if (ep_.closed())
        closed_error("flush");
    // Reads are ordered behind earlier writes at the target on every provider
    // but shm, whose reads skip its command queue unless asked for delivery
    // completion (smr_generic_rma in 1.17).
    auto* sink = reinterpret_cast<std::byte*>(scratch_.next());
    iovec iov{sink, 1};
    void* desc = scratch_.desc();
    fi_rma_iov rma{readable.read_address(0, 1), 1, readable.key()};
    fi_msg_rma msg{&iov, &desc, 1, peer.addr, &rma, 1, fence_ctx(), 0};
    fence_done_ = false;
    post<fi_readmsg>("fi_readmsg(flush)", msg.addr, &msg,
                     FI_COMPLETION | (queue_bypassing_reads_ ? FI_DELIVERY_COMPLETE : 0));
    await_fence(deadline, "the flush read");
    std::erase(unflushed_peers_, peer.addr);
}

void Endpoint::flush_before_read(const RemoteRegion& src, std::uint64_t offset, Peer peer)
{
    if (!unflushed(peer.addr))
        return; // writes to other peers only
    // The read itself would go through the queue only with delivery
    // completion, and then so would every later one: one queued byte of the
    // same region, waited for here, drains what was queued before it.
    flush(RemoteRegion(src.read_address(offset, 1), 1, src.key(), src.flags()), peer,
          Deadline::after(post_timeout_));
}

void Endpoint::readv(std::span<const Local> dst, const RemoteRegion& src, std::uint64_t offset,
                     void* context, Peer peer)
{
    const std::size_t limit = std::min(read_iov_limit(), max_iov);
    if (dst.empty() || dst.size() > limit)
        throw UsageError("readv", -FI_EINVAL, std::string(provider()),
                         fmt::format("{} local segments; reads on this endpoint scatter into 1 to "
                                     "{} (the device's max_sge_rd when it is smaller)",
                                     dst.size(), limit));
    std::array<iovec, max_iov> iov{};
    std::array<void*, max_iov> desc{};
    std::size_t total = 0;
    for (std::size_t i = 0; i < dst.size(); ++i) {
        iov[i] = {dst[i].addr, dst[i].len};
        desc[i] = dst[i].desc;
        total += dst[i].len;
    }
    fi_rma_iov rma{src.read_address(offset, total), total, src.key()};
    if (total - 1 >= max_transfer_) [[unlikely]]
        if (odd_length("readv", Op::read, total, context))
            return;
    for (const Local& l : dst)
        q_->keep_sink(l);
    post_readmsg({iov.data(), desc.data(), dst.size(), peer.addr, &rma, 1, context, 0}, src, offset, peer);
}

std::size_t detail::check_ranges(std::span<const Endpoint::Read> reads, const RemoteRegion& src,
                                 std::size_t limit, std::string_view provider)
{
    if (reads.empty() || reads.size() > limit)
        throw UsageError("read_ranges", -FI_EINVAL, std::string(provider),
                         fmt::format("{} ranges; one read on this endpoint takes 1 to {} (the "
                                     "provider's rma_iov_limit and iov_limit): read the rest "
                                     "in another call",
                                     reads.size(), limit));
    std::size_t total = 0;
    for (std::size_t i = 0; i < reads.size(); ++i) {
        if (reads[i].dst.len == 0)
            throw UsageError("read_ranges", -FI_EINVAL, std::string(provider),
                             fmt::format("range {} is empty: every range reads at least one byte", i));
        try {
            (void)src.read_address(reads[i].offset, reads[i].dst.len);
        } catch (const UsageError& e) {
            throw UsageError("read_ranges", e.code(), std::string(provider),
                             fmt::format("range {}: {}; nothing was posted", i, e.what()));
        }
        total += reads[i].dst.len;
    }
    return total;
}

void Endpoint::read_ranges(std::span<const Read> reads, const RemoteRegion& src, void* context,
                           Peer peer)
{
    const std::size_t total = detail::check_ranges(reads, src, read_ranges_limit(), provider());
    std::array<iovec, max_iov> iov{};
    std::array<void*, max_iov> desc{};
    std::array<fi_rma_iov, max_iov> rma{};
    for (std::size_t i = 0; i < reads.size(); ++i) {
        const Local& d = reads[i].dst;
        iov[i] = {d.addr, d.len};
        desc[i] = d.desc;
        rma[i] = {src.read_address(reads[i].offset, d.len), d.len, src.key()};
    }
    if (total - 1 >= max_transfer_)
        throw UsageError("read_ranges", -FI_EMSGSIZE, std::string(provider()),
                         fmt::format("{} B in all is over this endpoint's largest transfer ({} B): "
                                     "read fewer ranges at once, or split a range; nothing was "
                                     "posted",
                                     total, max_transfer_));
    for (const Read& r : reads)
        q_->keep_sink(r.dst);
    post_readmsg({iov.data(), desc.data(), reads.size(), peer.addr, rma.data(), reads.size(), context, 0},
                 src, reads[0].offset, peer);
}

void Endpoint::post_readmsg(const fi_msg_rma& msg, const RemoteRegion& src, std::uint64_t offset,
                            Peer peer)
{
    if (!unflushed_peers_.empty())
        flush_before_read(src, offset, peer);
    post<fi_readmsg>("fi_readmsg", msg.addr, &msg, FI_COMPLETION);
    ++q_->in_flight_;
}

void Endpoint::inject_too_big(std::size_t len) const
{
    throw UsageError("write_inject", -FI_EINVAL, std::string(provider()),
                     fmt::format("{} B exceeds the inject size of {} B: use write()", len,
                                 inject_size_));
}

void Endpoint::unsupported(const char* what) const
{
    const std::string offering = detail::providers_with_atomics();
    throw UsageError(what, -FI_EOPNOTSUPP, std::string(provider()),
                     fmt::format("remote atomics are not supported by {} ({} endpoints); use a "
                                 "provider that offers them ({}), or build the update from RMA "
                                 "read and write under your own locking",
                                 provider(), to_string(kind_),
                                 offering.empty() ? "none does on this machine"
                                                  : "on this machine: " + offering));
}

void Endpoint::fetch_add(Local result, const RemoteRegion& dst, std::uint64_t offset,
                         std::uint64_t operand, void* context, Peer peer)
{
    if (!atomics_)
        unsupported("fetch_add");
    const std::uint64_t addr = dst.atomic_address(offset);
    if (result.len < sizeof(std::uint64_t))
        throw UsageError("fetch_add", -FI_EINVAL, std::string(provider()),
                         "the result buffer must hold 8 bytes");
    q_->keep_sink(result);
    auto* s = scratch_.next();
    s->operand = operand;
    const void* buf = quirks_.atomic_operands_by_value
                          ? reinterpret_cast<const void*>(static_cast<std::uintptr_t>(operand))
                          : &s->operand;
    post<fi_fetch_atomic>("fi_fetch_atomic", peer.addr, buf, 1, scratch_.desc(), result.addr, result.desc, peer.addr, addr, dst.key(), FI_UINT64, FI_SUM, context);
    ++q_->in_flight_;
}

void Endpoint::compare_swap(Local result, const RemoteRegion& dst, std::uint64_t offset,
                            std::uint64_t expected, std::uint64_t desired, void* context,
                            Peer peer)
{
    if (!atomics_)
        unsupported("compare_swap");
    const std::uint64_t addr = dst.atomic_address(offset);
    if (result.len < sizeof(std::uint64_t))
        throw UsageError("compare_swap", -FI_EINVAL, std::string(provider()),
                         "the result buffer must hold 8 bytes");
    q_->keep_sink(result);
    auto* s = scratch_.next();
    s->operand = desired;
    s->compare = expected;
    void* desc = scratch_.desc();
    const bool by_value = quirks_.atomic_operands_by_value;
    const void* swap =
        by_value ? reinterpret_cast<const void*>(static_cast<std::uintptr_t>(desired)) : &s->operand;
    const void* compare =
        by_value ? reinterpret_cast<const void*>(static_cast<std::uintptr_t>(expected)) : &s->compare;
    post<fi_compare_atomic>("fi_compare_atomic", peer.addr, swap, 1, desc, compare, desc, result.addr, result.desc, peer.addr, addr, dst.key(), FI_UINT64, FI_CSWAP, context);
    ++q_->in_flight_;
}

bool Endpoint::odd_length(const char* call, Op op, std::size_t len, void* context)
{
    if (ep_.closed())
        closed_error(call);
    if (len == 0) {
        complete_locally(op, context, 0);
        return true;
    }
    throw UsageError(call, -FI_EMSGSIZE, std::string(provider()),
                     fmt::format("{} B exceeds the provider's max_msg_size of {} B: split the "
                                 "transfer into pieces of at most Endpoint::max_transfer() bytes; "
                                 "nothing was posted",
                                 len, max_transfer_));
}

} // namespace weft
