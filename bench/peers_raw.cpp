// SPDX-License-Identifier: MIT
// The raw-libfabric side of weft-peers-bench: a hub and its peers doing what
// the weft side does with a Node, with nothing but fi_* calls. RDM: one
// endpoint and an FI_AV_TABLE address vector, a peer is an fi_av_insert; MSG:
// a passive endpoint, and an endpoint per peer bound to one completion queue
// and one event queue. Every endpoint posts the receives weft's would
// (Options::rx_slots of Options::slot_size, registered), so the two carry the
// same buffers and the difference is what each adds per peer.
#include "peers_raw.hpp"

namespace weft::peers {

using raw::ok;
using raw::Raw;

Result raw_hub(const Config& c, std::vector<Child>& children)
{
    Raw hub(c, true, {});
    const auto name = hub.name();
    (void)fi_cq_read(hub.cq, nullptr, 0); // the provider's first progress, as weft's Node has had
    Result r;
    r.before = Usage::now();
    const auto start = Clock::now();
    if (c.kind == EndpointKind::rdm)
        for (auto& child : children) {
            fi_addr_t a = FI_ADDR_UNSPEC;
            if (fi_av_insert(hub.av, child.address.data(), 1, &a, 0, nullptr) != 1)
                throw std::runtime_error("fi_av_insert failed");
            hub.addrs.push_back(a);
        }
    for (auto& child : children)
        child.release(name);
    // Every child says hello (its index); the hub answers each.
    std::vector<Raw::Got> got;
    std::size_t answered = 0;
    int sent = 0;
    const auto until = Deadline::after(std::chrono::seconds(120));
    while (answered < children.size() || sent < static_cast<int>(children.size())) {
        if (hub.eq)
            (void)hub.events();
        sent += hub.poll(got);
        for (const auto& g : got) {
            const std::size_t who = g.value;
            if (c.kind == EndpointKind::rdm)
                hub.send(0, hub.addrs.at(who), who);
            else
                hub.send(g.ep, FI_ADDR_UNSPEC, who);
            ++answered;
        }
        got.clear();
        if (until.expired())
            throw std::runtime_error(fmt::format("raw hub: {} of {} answered, {} sends completed",
                                                 answered, children.size(), sent));
    }
    r.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    r.after = Usage::now();
    if (c.aggregate) {
        const Traffic t = raw::traffic_hub(
            hub, children, c.provider == "shm" ? traffic::shm_read_nap : std::chrono::microseconds{});
        r.write_mb_s = t.write_mb_s;
        r.messages_s = t.messages_s;
        r.reads_s = t.reads_s;
    }
    for (auto& child : children)
        child.dismiss();
    return r;
}

int raw_child(const Config& c, Channel& hub_channel, std::uint32_t index)
{
    // Everything opens before the release, as the weft side's Node does:
    // RDM: the endpoint, whose name goes to the hub; MSG: the fabric, domain
    // and queues (the endpoint needs the hub's address).
    Raw me(c, false, std::span<const std::byte>());
    (void)fi_cq_read(me.cq, nullptr, 0); // the provider's first progress
    if (c.kind == EndpointKind::rdm)
        hub_channel.send_bytes(me.name());
    else
        hub_channel.send_bytes(std::vector<std::byte>(1));
    const auto hub = hub_channel.receive_bytes();
    fi_addr_t to = FI_ADDR_UNSPEC;
    if (c.kind == EndpointKind::rdm) {
        if (fi_av_insert(me.av, hub.data(), 1, &to, 0, nullptr) != 1)
            throw std::runtime_error("fi_av_insert failed");
    } else {
        fi_info* aimed = fi_dupinfo(me.info);
        std::free(aimed->dest_addr);
        aimed->dest_addr = std::malloc(hub.size());
        std::memcpy(aimed->dest_addr, hub.data(), hub.size());
        aimed->dest_addrlen = hub.size();
        fid_ep* ep = me.add_endpoint(aimed);
        const int r = fi_connect(ep, aimed->dest_addr, nullptr, 0);
        fi_freeinfo(aimed);
        ok(r, "fi_connect");
        const auto until = Deadline::after(std::chrono::seconds(60));
        while (me.events() == 0)
            if (until.expired())
                throw std::runtime_error("raw child: no FI_CONNECTED");
    }
    me.send(0, to, index);
    std::vector<Raw::Got> got;
    const auto until = Deadline::after(std::chrono::seconds(120));
    while (got.empty()) {
        (void)me.poll(got);
        if (until.expired())
            throw std::runtime_error("raw child: no answer from the hub");
    }
    if (c.aggregate)
        raw::traffic_child(me, to, hub_channel, index);
    try {
        while (!hub_channel.dismissed())
            (void)me.poll(got);
    } catch (const std::exception&) {
        // the hub closed its endpoints first: this side is done anyway
    }
    return 0;
}

} // namespace weft::peers
