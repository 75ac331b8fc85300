// SPDX-License-Identifier: MIT
/// @brief Completions' fast paths (poll, wait for one operation, wait for an
/// op), inline so that a wait that finds its completion at once costs no call
/// into libweft.so. Included by weft/fabric/completions.hpp; not a header of its own.
#pragma once

#include "weft/fabric/completions.hpp"

namespace weft {

namespace detail {
/// The Op of a completion, from its libfabric flags.
constexpr Op op_from_flags(std::uint64_t flags) noexcept
{
    if (flags & FI_ATOMIC)
        return Op::atomic;
    if (flags & FI_RMA)
        return (flags & FI_READ) ? Op::read : Op::write;
    if (flags & FI_RECV)
        return Op::recv;
    return Op::send;
}
} // namespace detail

// ---- The fast paths, inline like libfabric's own fi_cq_read(): the call into
// libweft.so costs more than weft's checks. Everything unusual is out of line
// in src/fabric/completions.cpp. ----

[[gnu::always_inline]] inline bool Completions::is_own(const fi_cq_data_entry& e, void* context) const
{
    return e.op_context == context && !(e.flags & (FI_REMOTE_WRITE | FI_RECV));
}

[[gnu::always_inline]] inline Completion Completions::take_own(const fi_cq_data_entry& e)
{
    --in_flight_;
    return Completion{.context = e.op_context, .op = detail::op_from_flags(e.flags), .len = e.len};
}

inline void Completions::keep_entry(const fi_cq_data_entry& e, fi_addr_t from, bool sources)
{
    Completion c;
    if (translate(e, c)) {
        if (sources)
            name_source(c, e, from);
        deferred_.push_back(c); // the slow path finds it there
    }
}

inline std::size_t Completions::poll(std::span<Completion> out)
{
    // Nothing held back: read the queue straight; an empty queue (a spinning
    // poller's usual answer) costs two compares more than fi_cq_read.
    if (deferred_.empty() && plain() && !out.empty()) [[likely]] {
        activity_.note();
        std::array<fi_cq_data_entry, poll_batch> entries;
        const std::uint64_t absorbed_before = absorptions_;
        const std::size_t n = read_cq(entries.data(), std::min(poll_batch, out.size()));
        if (n == 0 && absorptions_ == absorbed_before) [[likely]]
            return 0;
        if (const std::size_t m = take_entries(entries.data(), n, out))
            return m;
        // Only weft's own entries: the caller's may be right behind them.
    }
    return poll_slow(out);
}

/// The waits' fast path: spins on the queue one entry at a time. The first
/// entry is returned as `accept` makes it, or kept for the slow path (which
/// also owns the deadline: nothing comes back once it passed). A queue that
/// names sources (an RDM Node's) reads with fi_cq_readfrom; the choice is made
/// once per wait, not on every spin.
template <class Accept>
[[gnu::always_inline]] inline std::optional<Completion> Completions::spin_one(Accept&& accept,
                                                                             Deadline deadline)
{
    return sources_ ? spin<true>(accept, deadline) : spin<false>(accept, deadline);
}

template <bool Sources, class Accept>
[[gnu::always_inline]] inline std::optional<Completion> Completions::spin(Accept& accept,
                                                                         Deadline deadline)
{
    fi_addr_t from = FI_ADDR_NOTAVAIL;
    Rhythm rhythm = this->rhythm();
    for (std::uint32_t spins = 1;; ++spins) {
        activity_.note();
        fi_cq_data_entry e;
        if ((Sources ? read_cq_from(&e, &from, 1) : read_cq(&e, 1)) == 1) {
            if (std::optional<Completion> c = accept(e)) [[likely]]
                return c;
            keep_entry(e, from, Sources);
            return std::nullopt;
        }
        if ((spins & rhythm.every) == 0) [[unlikely]] {
            rhythm.idle_check();
            if (idle_hook_)
                idle_hook_(idle_arg_);
            if (deadline.expired()) {
                spun_out_ = true; // the slow path tells this from a deadline passed on entry
                return std::nullopt;
            }
        }
    }
}

inline Completion Completions::wait_for(Op op, Deadline deadline)
{
    // A notification and none held back: the next entry is usually it (a
    // write_notify ping-pong).
    if (op == Op::notify && plain() && !notify_peer_bits_ && !holds(Op::notify)) [[likely]] {
        const auto notify = [](const fi_cq_data_entry& e) -> std::optional<Completion> {
            if ((e.flags & FI_REMOTE_CQ_DATA) && e.op_context == nullptr)
                return Completion{.op = Op::notify, .data = static_cast<std::uint32_t>(e.data)};
            return std::nullopt;
        };
        if (auto c = spin_one(notify, deadline))
            return *c;
    }
    return wait_for_slow(op, deadline);
}

[[gnu::always_inline]] inline Completion Completions::wait(void* context, Deadline deadline)
{
    // An inject's completion, or a same-host lane operation's, reported by
    // weft itself, waits at the front: no call.
    if (!deferred_.empty() && lent_.empty() && deferred_[0].context == context &&
        deferred_[0].op != Op::recv && deferred_[0].op != Op::notify)
        return deferred_.pop_front();
    return wait_queue(context, deadline);
}

inline Completion Completions::wait_queue(void* context, Deadline deadline)
{
    // One operation in flight, the common case: nothing held back, and the
    // next entry is this one.
    if (deferred_.empty() && plain_wait()) [[likely]] {
        const auto mine = [this, context](const fi_cq_data_entry& e) -> std::optional<Completion> {
            if (is_own(e, context))
                return take_own(e);
            return std::nullopt;
        };
        if (auto c = spin_one(mine, deadline))
            return *c;
    }
    return wait_slow(context, deadline);
}

[[gnu::always_inline]] inline Completions::Look Completions::look_once(void* context, Completion& out)
{
    if (!deferred_.empty() || !plain_wait()) [[unlikely]]
        return Look::other;
    // Others in flight: their completions, this one's among them, come in
    // batches from the loop's dispatch(); a look per post would add a read
    // (tcp: a turn of its progress engine) per operation.
    if (in_flight_ > 1)
        return Look::none;
    activity_.note();
    fi_cq_data_entry e;
    fi_addr_t from = FI_ADDR_NOTAVAIL;
    if ((sources_ ? read_cq_from(&e, &from, 1) : read_cq(&e, 1)) == 0)
        return Look::none;
    if (is_own(e, context)) [[likely]] {
        out = take_own(e);
        return Look::mine;
    }
    keep_entry(e, from, sources_);
    return Look::other;
}

} // namespace weft
