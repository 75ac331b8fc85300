// SPDX-License-Identifier: MIT
// Node::dispatch() and the awaitables of node.hpp: one batch of completions
// read, each handed to the slot or listener that awaits it, then the waiters
// it readied resumed, here and nowhere else.
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/peers/node.hpp"

namespace weft {

bool Node::claim(const Completion& c)
{
    if (c.context && dispatcher_.owns(c.context)) {
        dispatcher_.complete(static_cast<detail::Slot*>(c.context), c, {});
        return true;
    }
    if ((c.op == Op::notify || c.op == Op::recv) && dispatcher_.offer(c)) {
        if (c.lent)
            q_->lent_.push_back(c.lent); // its slot goes back at the next read
        return true;
    }
    return false;
}

void Node::settle()
{
    auto& kept = q_->deferred_;
    for (std::size_t i = 0; i < kept.size();) {
        const Completion& c = kept[i];
        if (c.context && dispatcher_.owns(c.context) && c.op != Op::recv && c.op != Op::notify) {
            const Completion taken = c;
            kept.erase(i);
            dispatcher_.complete(static_cast<detail::Slot*>(taken.context), taken, {});
        } else {
            ++i;
        }
    }
}

bool Node::take_kept(detail::Listener& l)
{
    auto& kept = q_->deferred_;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        const Completion c = kept[i];
        if ((c.op == Op::notify || c.op == Op::recv) && l.offer(c)) {
            kept.erase(i);
            if (c.lent)
                q_->lent_.push_back(c.lent);
            return true;
        }
    }
    return false;
}

std::size_t Node::poll(std::span<Completion> out)
{
    const Use use(*this, "Node::poll");
    tend();
    if (!dispatcher_.armed()) [[likely]]
        return q_->poll(out);
    // Awaited operations' completions go to their waiters, not to the caller.
    std::size_t n = 0;
    try {
        n = q_->poll(out);
    } catch (const Error& e) {
        if (!dispatcher_.owns(e.context()))
            throw;
        dispatcher_.complete(static_cast<detail::Slot*>(e.context()), Completion{},
                             std::current_exception());
        return 0;
    }
    std::size_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (out[i].context && dispatcher_.owns(out[i].context) && out[i].op != Op::recv &&
            out[i].op != Op::notify)
            dispatcher_.complete(static_cast<detail::Slot*>(out[i].context), out[i], {});
        else
            out[m++] = out[i];
    }
    return m;
}

std::optional<Completion> Node::poll_one()
{
    Completion c;
    if (poll(std::span(&c, 1)) == 1)
        return c;
    return std::nullopt;
}

void Node::check_local(const Local& local, bool sink) const
{
    if (local.region)
        q_->check_local(*local.region, sink);
}

std::size_t Node::dispatch()
{
    const Use use(*this, "Node::dispatch");
    if (dispatcher_.resuming()) [[unlikely]]
        throw UsageError("Node::dispatch", -FI_EINVAL, std::string(provider()),
                         "called from a coroutine that dispatch() is resuming (a blocking wait, "
                         "run() or Transfer::wait inside it): co_await instead");
    // Connection events and lost peers every 32nd dispatch: a loop that
    // spins on dispatch() pays for them as a blocking wait's idle check does.
    if ((ticks_++ & 31) == 0)
        tend();
    const std::size_t routed = route();
    // Deadlines read the clock every 16th dispatch, and only while a waiter
    // has one; a cancel is seen at once.
    if (dispatcher_.poked() || (dispatcher_.due() && (ticks_ & 15) == 0))
        dispatcher_.expire();
    dispatcher_.resume_ready();
    return routed;
}

std::size_t Node::route(detail::Slot* mine, Completion* own)
{
    const Use use(*this, "Node::route");
    std::size_t routed = 0;
    // What weft kept meanwhile (an inject's completion; what a blocking wait
    // read past) that an awaiter wants.
    if (!q_->deferred_.empty()) [[unlikely]] {
        auto& kept = q_->deferred_;
        for (std::size_t i = 0; i < kept.size();) {
            const Completion c = kept[i];
            const bool note = c.op == Op::notify || c.op == Op::recv;
            if (!note && c.context && dispatcher_.owns(c.context)) {
                kept.erase(i);
                if (mine && c.context == mine) { // the caller's own (a send completed locally)
                    dispatcher_.finish(mine);
                    *own = c;
                    mine = nullptr; // freed: a sink below may take it again
                } else {
                    dispatcher_.complete(static_cast<detail::Slot*>(c.context), c, {});
                }
                ++routed;
            } else if (note && dispatcher_.listening() && dispatcher_.offer(c)) {
                kept.erase(i);
                if (c.lent)
                    q_->lent_.push_back(c.lent);
                ++routed;
            } else {
                ++i;
            }
        }
    }
    std::size_t n = 0;
    try {
        if (q_->deferred_.empty() && q_->plain_wait()) [[likely]] {
            // The fast path, as Completions::poll's: the queue's raw entries, an
            // awaited operation's completion routed straight from its entry (a
            // queue that names sources reads them too, for the others).
            q_->activity_.note();
            std::array<fi_cq_data_entry, Completions::poll_batch> entries;
            std::array<fi_addr_t, Completions::poll_batch> from;
            const std::uint64_t absorbed = q_->absorptions_;
            n = q_->sources_ ? q_->read_cq_from(entries.data(), from.data(), entries.size())
                             : q_->read_cq(entries.data(), entries.size());
            for (std::size_t i = 0; i < n; ++i) {
                const fi_cq_data_entry& e = entries[i];
                if (mine && e.op_context == mine && !(e.flags & FI_REMOTE_CQ_DATA)) [[likely]] {
                    // The caller's own: taken here, with no call through its sink.
                    --q_->in_flight_;
                    dispatcher_.finish(mine);
                    *own = Completion{.context = mine, .op = detail::op_from_flags(e.flags), .len = e.len};
                    mine = nullptr;
                    ++routed;
                    continue;
                }
                if (!(e.flags & FI_REMOTE_CQ_DATA) && dispatcher_.owns(e.op_context)) [[likely]] {
                    --q_->in_flight_;
                    dispatcher_.complete(static_cast<detail::Slot*>(e.op_context),
                                         Completion{.context = e.op_context,
                                                    .op = detail::op_from_flags(e.flags),
                                                    .len = e.len},
                                         {});
                    ++routed;
                    continue;
                }
                Completion c;
                if (!q_->translate(e, c))
                    continue;
                if (q_->sources_)
                    q_->name_source(c, e, from[i]);
                if (claim(c))
                    ++routed;
                else
                    q_->defer(c); // a blocking wait's or poll's, later
            }
            if (!q_->follow_ups_.empty()) [[unlikely]]
                q_->run_follow_ups();
            q_->read_any_ = n > 0 || q_->absorptions_ != absorbed;
        } else {
            if (!q_->lent_.empty())
                q_->repost_lent();
            auto& got = q_->waiting_; // not initialised on every dispatch
            n = q_->drain(got);
            for (std::size_t i = 0; i < n; ++i) {
                if (claim(got[i]))
                    ++routed;
                else
                    q_->defer(got[i]);
            }
        }
    } catch (const Error& e) {
        if (!dispatcher_.owns(e.context()))
            throw; // the caller's own operation (posted with its own context)
        dispatcher_.complete(static_cast<detail::Slot*>(e.context()), Completion{},
                             std::current_exception());
        ++routed;
    }
    if (n == 0 && !q_->read_any_ && dispatcher_.orphaned()) [[unlikely]]
        dispatcher_.quiet();
    return routed;
}

} // namespace weft
