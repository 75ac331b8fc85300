// SPDX-License-Identifier: MIT
// weft-peers-bench --aggregate: N clients into one server over one Node.
// Every client writes W x 64 KiB into its own slot of the hub's region (16
// in flight), then sends M 8 B messages (16 in flight), then reads R x 64 B
// of its slot, one at a time; the hub drives its Node and takes the messages.
// Aggregate write bandwidth (and read rate) is the bytes (reads) over the time
// from the hub's go to the last client's done; the message rate is the
// messages over the time from the go to the last one taken.

#include <array>
#include <cstring>
#include <thread>

#include "peers.hpp"

namespace weft::peers {

using namespace traffic;

Traffic traffic_hub(Node& node, std::vector<Child>& children, std::chrono::microseconds read_nap)
{
    const std::size_t n = children.size();
    auto inbox = node.allocate(n * chunk, Access::remote_read_write);
    const auto wire = inbox->remote().encode();
    for (auto& child : children)
        child.channel.send_bytes(wire);
    Traffic t;
    // Writes: the hub is a passive target; it progresses until all say done.
    auto start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_writes);
    await_done(children, [&] { node.progress(); }, Deadline::after(std::chrono::seconds(120)));
    const double write_s = std::chrono::duration<double>(Clock::now() - start).count();
    t.write_mb_s = static_cast<double>(n * writes * chunk) / write_s / 1e6;
    // Messages: taken as they come.
    start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_messages);
    const std::size_t expected = n * messages;
    std::size_t got = 0;
    std::array<Completion, 32> batch;
    const auto until = Deadline::after(std::chrono::seconds(120));
    while (got < expected) {
        const std::size_t k = node.poll(batch);
        for (std::size_t i = 0; i < k; ++i)
            got += batch[i].op == Op::recv;
        if (k == 0 && until.expired())
            throw std::runtime_error("the hub did not receive every message in 120 s");
    }
    t.messages_s = static_cast<double>(expected) /
                   std::chrono::duration<double>(Clock::now() - start).count();
    // Reads: a passive target again.
    start = Clock::now();
    for (auto& child : children)
        child.channel.send_bytes(go_reads);
    await_done(children, [&] { node.progress(); }, Deadline::after(std::chrono::seconds(120)), read_nap);
    t.reads_s = static_cast<double>(n * reads) /
                std::chrono::duration<double>(Clock::now() - start).count();
    return t;
}

void traffic_child(Node& node, PeerId hub, Channel& channel, std::uint32_t index)
{
    const RemoteRegion slot = RemoteRegion::decode(channel.receive_bytes());
    auto src = node.allocate(chunk + 8, Access::local);
    std::memset(src->data(), static_cast<int>(index), chunk + 8);
    std::array<int, window> ctx{};
    const auto until = Deadline::after(std::chrono::seconds(120));
    (void)channel.receive_bytes(); // go
    for (int i = 0; i < writes; ++i) {
        if (i >= window)
            (void)node.wait(&ctx[i % window], until);
        node.write(hub, src->slice(0, chunk), slot, index * chunk, &ctx[i % window]);
    }
    for (int i = std::max(0, writes - window); i < writes; ++i)
        (void)node.wait(&ctx[i % window], until);
    channel.send_bytes(go_writes); // done
    (void)channel.receive_bytes(); // go
    for (int i = 0; i < messages; ++i) {
        if (i >= window)
            (void)node.wait(&ctx[i % window], until);
        node.send(hub, src->slice(chunk, 8), &ctx[i % window]);
    }
    for (int i = std::max(0, messages - window); i < messages; ++i)
        (void)node.wait(&ctx[i % window], until);
    (void)channel.receive_bytes(); // go
    const auto reads_until = Deadline::after(std::chrono::seconds(120));
    std::array<Completion, 4> got;
    for (int i = 0; i < reads; ++i) {
        node.read(hub, src->slice(0, read_size), slot, index * chunk, &ctx[0]);
        for (bool done = false; !done;) { // as weft-kv-load polls with more clients than cores
            const std::size_t n = node.poll(got);
            for (const Completion& c : std::span(got).first(n))
                done = done || c.context == &ctx[0];
            if (n == 0)
                std::this_thread::yield();
            if (!done && reads_until.expired())
                throw std::runtime_error("a client's read did not complete in 120 s");
        }
    }
    channel.send_bytes(go_reads); // done
}

} // namespace weft::peers
