// SPDX-License-Identifier: MIT
// weft-peers-bench --aggregate on raw libfabric: the pattern of
// peers_traffic.cpp with fi_write, fi_send and fi_read. Every client writes
// W x 64 KiB into its own slot of the hub's region (16 in flight), then sends
// M 8 B messages (16 in flight), then reads R x 64 B of its slot one at a
// time; the hub reads its queue, posts its receives again and counts the
// messages.

#include <array>
#include <thread>

#include "peers_raw.hpp"

namespace weft::peers::raw {
namespace {

using namespace traffic;

/// The hub's region as a client needs it: address (or offset) and key.
struct Slot {
    std::uint64_t addr;
    std::uint64_t key;
};

/// Runs `count` operations with at most `window` in flight, each posted by
/// `post(context)`; returns when all have completed.
/// `in_flight` 1: the core is given up (sched_yield) after every empty poll, as
/// weft-kv-load's clients do with more clients than cores.
template <class Post>
void windowed(Raw& me, int count, Post post, Deadline until, std::size_t in_flight = window)
{
    std::array<fi_context, window> contexts{};
    std::vector<void*> free;
    for (std::size_t i = 0; i < std::min(in_flight, contexts.size()); ++i)
        free.push_back(&contexts[i]);
    std::vector<Raw::Got> got;
    int completed = 0;
    for (int posted = 0; posted < count || completed < count;) {
        if (posted < count && !free.empty()) {
            void* ctx = free.back();
            free.pop_back();
            post(ctx);
            ++posted;
            continue;
        }
        const int n = me.poll(got, &free);
        completed += n;
        got.clear();
        if (n == 0 && in_flight == 1)
            std::this_thread::yield();
        if (until.expired())
            throw std::runtime_error("raw client: its operations did not complete in 120 s");
    }
}

} // namespace

Traffic traffic_hub(Raw& hub, std::vector<Child>& children, std::chrono::microseconds read_nap)
{
    const std::size_t n = children.size();
    std::vector<char> inbox(n * chunk);
    fid_mr* mr = nullptr;
    ok(fi_mr_reg(hub.domain, inbox.data(), inbox.size(), FI_REMOTE_WRITE | FI_REMOTE_READ, 0,
                 hub.next_key++, 0, &mr, nullptr),
       "fi_mr_reg");
    const bool virt = hub.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
    const Slot slot{virt ? reinterpret_cast<std::uint64_t>(inbox.data()) : 0, fi_mr_key(mr)};
    for (auto& child : children)
        child.channel.send_bytes(std::as_bytes(std::span(&slot, 1)));
    Traffic t;
    std::vector<Raw::Got> got;
    auto start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_writes);
    await_done(children, [&] { (void)hub.poll(got); }, Deadline::after(std::chrono::seconds(120)));
    const double write_s = std::chrono::duration<double>(Clock::now() - start).count();
    t.write_mb_s = static_cast<double>(n * writes * chunk) / write_s / 1e6;
    got.clear();
    start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_messages);
    const std::size_t expected = n * messages;
    const auto until = Deadline::after(std::chrono::seconds(120));
    while (got.size() < expected) {
        (void)hub.poll(got);
        if (until.expired())
            throw std::runtime_error("the raw hub did not receive every message in 120 s");
    }
    t.messages_s = static_cast<double>(expected) /
                   std::chrono::duration<double>(Clock::now() - start).count();
    got.clear();
    start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_reads);
    await_done(children, [&] { (void)hub.poll(got); }, Deadline::after(std::chrono::seconds(120)),
               read_nap);
    t.reads_s = static_cast<double>(n * reads) /
                std::chrono::duration<double>(Clock::now() - start).count();
    fi_close(&mr->fid);
    return t;
}

void traffic_child(Raw& me, fi_addr_t hub, Channel& channel, std::uint32_t index)
{
    const auto wire = channel.receive_bytes();
    Slot slot{};
    std::memcpy(&slot, wire.data(), sizeof slot);
    std::vector<char> src(chunk + 8, static_cast<char>(index));
    fid_mr* mr = nullptr;
    ok(fi_mr_reg(me.domain, src.data(), src.size(), FI_WRITE | FI_SEND | FI_READ, 0, me.next_key++,
                 0, &mr, nullptr),
       "fi_mr_reg");
    fid_ep* ep = me.eps.back(); // RDM: the one; MSG: the connection to the hub
    const auto until = Deadline::after(std::chrono::seconds(120));
    (void)channel.receive_bytes(); // go
    windowed(
        me, writes,
        [&](void* ctx) {
            me.post(
                [&] {
                    return fi_write(ep, src.data(), chunk, fi_mr_desc(mr), hub,
                                    slot.addr + index * chunk, slot.key, ctx);
                },
                "fi_write");
        },
        until);
    channel.send_bytes(go_writes); // done
    (void)channel.receive_bytes(); // go
    windowed(
        me, messages,
        [&](void* ctx) {
            me.post([&] { return fi_send(ep, src.data() + chunk, 8, fi_mr_desc(mr), hub, ctx); },
                    "fi_send");
        },
        until);
    (void)channel.receive_bytes(); // go
    windowed(
        me, reads,
        [&](void* ctx) {
            me.post(
                [&] {
                    return fi_read(ep, src.data(), read_size, fi_mr_desc(mr), hub,
                                   slot.addr + index * chunk, slot.key, ctx);
                },
                "fi_read");
        },
        Deadline::after(std::chrono::seconds(120)), 1);
    channel.send_bytes(go_reads); // done
    fi_close(&mr->fid);
}

} // namespace weft::peers::raw
