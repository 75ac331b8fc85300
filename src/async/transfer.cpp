// SPDX-License-Identifier: MIT
// Transfer: prepared (checked, contexts reserved) once, posted many times;
// its entries' completions counted in its state, its notifications sent on
// the last write or after the target's writes completed.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "weft/async/loop.hpp"
#include "weft/async/transfer.hpp"
#include "weft/base/error.hpp"

namespace weft {

namespace detail {

TransferState::TransferState(std::shared_ptr<Node> n, Direction d, Notify no)
    : node(std::move(n)), direction(d), notify(no)
{
}

TransferState::~TransferState()
{
    if (auto* w = static_cast<TransferAwait*>(waiter)) {
        // A coroutine awaits a Transfer being destroyed: it resumes with a cancel.
        w->state_ = nullptr;
        w->early = Waiter::Early::cancel;
        node->dispatcher().ready(*w);
    }
    auto& d = node->dispatcher();
    for (Entry& e : entries)
        if (e.slot)
            d.release(e.slot); // one still flying is reaped when it completes
    for (Target& t : targets)
        if (t.note)
            d.release(t.note);
}

Slot* TransferState::slot_of(std::uint32_t index, PeerId peer)
{
    return node->dispatcher().take(this, index, peer, true);
}

void TransferState::fail(std::uint32_t index, const std::exception_ptr& e) noexcept
{
    if (index < entries.size())
        targets[entries[index].target].failed = true;
    if (!error) {
        error = e;
        // A notification's failure names its target's last entry.
        failed_entry = index < entries.size() ? index : targets[index - entries.size()].last;
    }
}

void TransferState::note_due(std::uint32_t ti) noexcept
{
    if (targets[ti].failed)
        one_done(); // an entry to it failed: no notification, it will not complete
    else
        post_note(ti);
}

void TransferState::one_done() noexcept
{
    if (--remaining > 0)
        return;
    state = error ? Transfer::State::failed : Transfer::State::done;
    if (waiter)
        node->dispatcher().ready(*waiter);
}

void TransferState::completed(std::uint32_t index, const Completion&,
                              const std::exception_ptr& e) noexcept
{
    Slot*& slot = index < entries.size() ? entries[index].slot : targets[index - entries.size()].note;
    if (slot && slot->sink != this)
        slot = nullptr; // abandoned by a lost peer: taken again on the next post
    if (e)
        fail(index, e);
    if (index < entries.size()) {
        Target& t = targets[entries[index].target];
        if (--t.left == 0 && notify.enabled && !t.piggyback && !t.ordered_note)
            note_due(entries[index].target); // every byte is there: tell the target
    }
    one_done();
}

void TransferState::post_note(std::uint32_t ti) noexcept
{
    Target& t = targets[ti];
    const auto index = static_cast<std::uint32_t>(entries.size() + ti);
    try {
        if (!t.note)
            t.note = slot_of(index, t.peer);
        const Local payload = payload_len ? payload_mr->slice(0, payload_len) : Local{};
        node->send_note(t.peer, notify.value, payload, t.note);
        node->dispatcher().posted(t.note);
    } catch (...) {
        fail(index, std::current_exception());
        one_done(); // the note will not complete
    }
}

void TransferState::post_entry(std::uint32_t i)
{
    Entry& en = entries[i];
    Target& t = targets[en.target];
    const TransferEntry& e = en.e;
    if (!en.slot)
        en.slot = slot_of(i, e.peer);
    void* ctx = en.slot;
    if (direction == Direction::read) {
        node->read(e.peer, e.local, e.remote, e.offset, ctx);
    } else if (notify.enabled && t.piggyback && i == t.last) {
        node->write_notify(e.peer, e.local, e.remote, e.offset, notify.value, ctx);
    } else if (notify.enabled && !t.piggyback && !t.ordered_note && !t.lane) {
        node->endpoint(e.peer).write_delivered(e.local, e.remote, e.offset, ctx,
                                               node->fabric_peer(e.peer));
    } else if (chained(i)) {
        node->endpoint(e.peer).write_more(e.local, e.remote, e.offset, ctx, node->fabric_peer(e.peer));
    } else {
        node->write(e.peer, e.local, e.remote, e.offset, ctx);
    }
    node->dispatcher().posted(en.slot);
}

bool TransferState::chained(std::uint32_t i) const noexcept
{
    // FI_MORE where the next post goes to the same endpoint at once: the next
    // entry to the same peer, on an endpoint of its own (MSG) or the shared one
    // (RDM, entries to one peer in a row). The target's last write goes without,
    // and ends the chain.
    const Target& t = targets[entries[i].target];
    if (i == t.last || t.lane)
        return false;
    return node->kind() == EndpointKind::msg || entries[i + 1].e.peer == entries[i].e.peer;
}

void TransferState::post()
{
    if (state == Transfer::State::in_flight)
        throw UsageError("Transfer::post", -FI_EINVAL, std::string(node->provider()),
                         fmt::format("the transfer is still in flight ({} completions to come): "
                                     "wait for it (wait, co_await done, status) before posting "
                                     "it again",
                                     remaining));
    state = Transfer::State::in_flight;
    error = nullptr;
    failed_entry = Transfer::Status::npos;
    remaining = entries.size();
    for (Target& t : targets) {
        t.left = t.entries;
        t.failed = false;
        remaining += notify.enabled && !t.piggyback;
    }
    const Node::Use use(*node, "Transfer::post");
    for (std::uint32_t i = 0; i < entries.size(); ++i) {
        try {
            post_entry(i);
        } catch (...) {
            // Not posted (its peer was lost since prepare): it failed, the others go on.
            fail(i, std::current_exception());
            Target& t = targets[entries[i].target];
            if (--t.left == 0 && notify.enabled && !t.piggyback && !t.ordered_note)
                note_due(entries[i].target);
            one_done();
        }
        const Target& t = targets[entries[i].target];
        if (notify.enabled && t.ordered_note && i == t.last)
            note_due(entries[i].target); // ordered behind the writes (FI_ORDER_SAW)
    }
    node->settle(); // injects' completions, reported by weft at once
}

} // namespace detail

// ---- Transfer ----

namespace {
struct Traits {
    bool waw, saw, cq_data;
    std::size_t max_transfer;
    std::size_t max_message; // 0: not known before the connection
};
Traits traits_of(const Endpoint& ep)
{
    return {ep.orders_writes(), ep.orders_sends_after_writes(), ep.notify_uses_cq_data(),
            ep.max_transfer(), ep.max_message()};
}
Traits traits_of(const Info& info)
{
    const std::uint64_t order = info->tx_attr->msg_order;
    return {(order & FI_ORDER_WAW) != 0, (order & FI_ORDER_SAW) != 0,
            info.cq_data_size() >= sizeof(std::uint32_t), info.max_msg_size(), 0};
}
} // namespace

Transfer::Transfer(std::unique_ptr<detail::TransferState> state) noexcept : state_(std::move(state)) {}
Transfer::Transfer(Transfer&&) noexcept = default;
Transfer& Transfer::operator=(Transfer&&) noexcept = default;
Transfer::~Transfer() = default;

Transfer Transfer::prepare(std::shared_ptr<Node> node, Direction direction,
                           std::span<const TransferEntry> entries, Notify notify)
{
    if (!node)
        throw UsageError("Transfer::prepare", -FI_EINVAL, "", "no Node (a null shared_ptr)");
    const std::string provider(node->provider());
    const auto refuse = [&](std::size_t i, const std::string& why) {
        throw UsageError("Transfer::prepare", -FI_EINVAL, provider,
                         fmt::format("entry {}: {}; nothing was prepared", i, why));
    };
    if (entries.empty())
        throw UsageError("Transfer::prepare", -FI_EINVAL, provider, "no entries");
    if (direction == Direction::read && notify.enabled)
        throw UsageError("Transfer::prepare", -FI_EINVAL, provider,
                         "a notification tells a target that data was written to it; a read "
                         "transfer has none (notify the peer with a message after it)");
    auto st = std::make_unique<detail::TransferState>(node, direction, notify);
    std::unordered_map<std::uint32_t, std::uint32_t> target_of;
    st->entries.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const TransferEntry& e = entries[i];
        if (!e.peer)
            refuse(i, "no peer (PeerId{})");
        if (node->is_lost(e.peer))
            refuse(i, fmt::format("peer {} is lost", e.peer.index));
        if (e.local.len == 0)
            refuse(i, "an empty local range");
        // What the peer's endpoint promises: its own where it exists (RDM, a
        // connected MSG peer), else the selection's (every MSG endpoint of a
        // Node is opened from it); prepare connects nothing.
        Traits tr = traits_of(node->selection().info());
        bool lane = false;
        try {
            // On the same-host lane a write is in place when it returns:
            // ordered, and the notification after it says so (where the
            // lane reaches the region: else libfabric carries it).
            lane = node->on_lane(e.peer, &e.remote);
            if (lane)
                tr = {true, true, true, SIZE_MAX, node->selection().options().slot_size};
            else if (node->kind() == EndpointKind::rdm || node->connected(e.peer))
                tr = traits_of(node->endpoint(e.peer));
            if (direction == Direction::write)
                (void)e.remote.write_address(e.offset, e.local.len);
            else
                (void)e.remote.read_address(e.offset, e.local.len);
            node->check_local(e.local, direction == Direction::read);
        } catch (const Error& err) {
            refuse(i, err.what());
        }
        if (e.local.len > tr.max_transfer)
            refuse(i, fmt::format("{} B is more than the provider's largest transfer ({} B)",
                                  e.local.len, tr.max_transfer));
        auto [it, fresh] = target_of.try_emplace(e.peer.index,
                                                 static_cast<std::uint32_t>(st->targets.size()));
        if (fresh) {
            detail::TransferState::Target t;
            t.peer = e.peer;
            t.lane = lane;
            // The notification rides on the last write where writes land in
            // order and a notification lands behind its write (CQ data, or a
            // framed message ordered after the write); a payload needs a
            // message ordered after writes. Decided from the endpoint's
            // ordering, never from the provider's name.
            const bool auto_ = notify.when == Notify::When::automatic;
            t.piggyback = auto_ && !notify.payload_capacity && tr.waw && (tr.cq_data || tr.saw);
            t.ordered_note = auto_ && notify.payload_capacity && tr.waw && tr.saw;
            if (tr.max_message && notify.payload_capacity + 8 > tr.max_message && notify.enabled)
                throw UsageError("Transfer::prepare", -FI_EMSGSIZE, provider,
                                 fmt::format("a {} B notification payload does not fit the "
                                             "peer's {} B receive slots with weft's 8 B header: "
                                             "raise Options::slot_size on both sides",
                                             notify.payload_capacity, tr.max_message));
            st->targets.push_back(t);
            st->target_ids.push_back(e.peer);
        }
        auto& t = st->targets[it->second];
        if (t.lane != lane) // one path per target: its notification follows its writes
            refuse(i, fmt::format("peer {}'s regions here are on two paths: the same-host lane "
                                  "reaches some (memory the peer allocated through weft) and not "
                                  "this one ({}); allocate the peer's regions with allocate(), or "
                                  "split the transfer",
                                  e.peer.index, node->path(e.peer)));
        ++t.entries;
        t.last = static_cast<std::uint32_t>(i);
        st->entries.push_back({e, nullptr, it->second});
    }
    if (notify.enabled && notify.payload_capacity)
        st->payload_mr = node->allocate(notify.payload_capacity, Access::local);
    // Every context reserved now: post() takes none.
    for (std::uint32_t i = 0; i < st->entries.size(); ++i)
        st->entries[i].slot = node->dispatcher().take(st.get(), i, st->entries[i].e.peer, true);
    if (notify.enabled)
        for (std::uint32_t t = 0; t < st->targets.size(); ++t)
            if (!st->targets[t].piggyback)
                st->targets[t].note = node->dispatcher().take(
                    st.get(), static_cast<std::uint32_t>(st->entries.size() + t),
                    st->targets[t].peer, true);
    return Transfer(std::move(st));
}

void Transfer::post()
{
    state_->post();
}

Transfer::Status Transfer::status() const noexcept
{
    return {state_->state, state_->remaining, state_->failed_entry, state_->error};
}

void Transfer::wait(Deadline deadline)
{
    auto& st = *state_;
    if (st.state == State::idle)
        throw UsageError("Transfer::wait", -FI_EINVAL, std::string(st.node->provider()),
                         "the transfer was never posted: post() it first");
    st.node->settle();
    detail::Loop loop(*st.node);
    while (!st.finished())
        loop.turn(deadline, "the transfer's completions");
    if (st.error)
        std::rethrow_exception(st.error);
}

detail::TransferAwait Transfer::done(Deadline deadline, std::stop_token stop)
{
    return {*state_, deadline, std::move(stop)};
}

void Transfer::set_value(std::uint32_t value)
{
    if (state_->state == State::in_flight)
        throw UsageError("Transfer::set_value", -FI_EINVAL, std::string(state_->node->provider()),
                         "the transfer is in flight: set the value before posting");
    state_->notify.value = value;
}

void Transfer::set_payload(std::span<const std::byte> payload)
{
    auto& st = *state_;
    const std::string provider(st.node->provider());
    if (st.state == State::in_flight)
        throw UsageError("Transfer::set_payload", -FI_EINVAL, provider,
                         "the transfer is in flight: set the payload before posting");
    if (!st.notify.enabled || payload.size() > st.notify.payload_capacity)
        throw UsageError("Transfer::set_payload", -FI_EMSGSIZE, provider,
                         fmt::format("a {} B payload; this transfer was prepared for {} B "
                                     "(Notify::payload_capacity{})",
                                     payload.size(), st.notify.payload_capacity,
                                     st.notify.enabled ? "" : ", and no notification"));
    if (!payload.empty())
        std::memcpy(st.payload_mr->data(), payload.data(), payload.size());
    st.payload_len = payload.size();
}

std::size_t Transfer::size() const noexcept { return state_->entries.size(); }
std::span<const PeerId> Transfer::targets() const noexcept { return state_->target_ids; }
bool Transfer::piggybacked(std::size_t target) const noexcept
{
    return state_->notify.enabled && state_->targets[target].piggyback;
}
Node& Transfer::node() const noexcept { return *state_->node; }

} // namespace weft
