// weft-kv-server: the KV node. A hash table of fixed-size slots in registered memory that
// clients read with RMA (GET costs this process nothing); PUT and DELETE arrive as requests
// written into a client's own request area with a notification, are applied here, slot by
// slot with a version and a CRC, and answered with a message. Clients come and go.
// Run: weft-kv-server [PORT] [SLOTS] [VALUE_MAX]; prints "listening on port P" when ready.
#include "kv.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

static volatile std::sig_atomic_t stopping = 0;

namespace {

struct Table {
    kv::Geometry g;
    // Allocated by weft on the first client's Node and registered on the others: with the
    // same-host lane on (WEFT_SAME_HOST=lane), one sealed memfd that every co-located client
    // maps read-only, so a GET is a memcpy.
    std::shared_ptr<weft::MemoryRegion> memory;
    std::span<std::byte> bytes;

    kv::Slot slot(std::uint64_t i) { return {bytes.data() + i % g.slots * g.slot_size(), g}; }

    kv::Status apply(kv::Op op, std::string_view key, std::span<const std::byte> value)
    {
        const std::uint64_t home = kv::hash(key);
        std::optional<std::uint64_t> free; // the first deleted or unused slot on the way
        for (std::uint32_t i = 0; i < kv::probe_max; ++i) {
            kv::Slot s = slot(home + i);
            if (s.state() == kv::State::full && s.key() == key) {
                s.rewrite(op == kv::Op::put ? kv::State::full : kv::State::deleted, key, value);
                return kv::Status::ok;
            }
            if (s.state() != kv::State::full && !free)
                free = home + i;
            if (s.state() == kv::State::unused)
                break; // the key is nowhere further
        }
        if (op == kv::Op::erase)
            return kv::Status::not_found;
        if (!free)
            return kv::Status::full;
        slot(*free).rewrite(kv::State::full, key, value);
        return kv::Status::ok;
    }
};

struct Client {
    weft::Connection c;
    std::shared_ptr<weft::MemoryRegion> requests, replies;
};

/// A Node the clients are peers of, and the table registered on it.
struct PerNode {
    std::shared_ptr<weft::Node> node;
    std::shared_ptr<weft::MemoryRegion> table;
    std::size_t clients = 0;
};

} // namespace

int main(int argc, char** argv)
try {
    for (const int s : {SIGTERM, SIGINT})
        std::signal(s, [](int) { stopping = 1; });
    const auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7480);
    if (argc > 2 && std::atol(argv[2]) < 1)
        throw std::invalid_argument("SLOTS is at least 1");
    Table t{kv::Geometry{argc > 2 ? static_cast<std::uint32_t>(std::atol(argv[2])) : 1u << 16, 64,
                         argc > 3 ? static_cast<std::uint32_t>(std::atol(argv[3])) : 4096, 16}};
    // Idle, the server sleeps on its Nodes' descriptors; a provider without one (shm) is
    // refused that, and the server naps 50 us at a time instead (1 ms with no client).
    // The loop below polls every Node and wakes when a request arrives: no progress thread
    // beside it (a thread each made a locked, slower domain).
    weft::Options options;
    options.waiting = weft::Waiting::sleep;
    options.progress = weft::Progress::polling;
    std::optional<weft::Server> listening;
    try {
        listening.emplace(options, "0.0.0.0", port);
    } catch (const weft::UsageError& e) {
        std::cout << e.what() << ": idle, this server naps 50 us at a time" << std::endl;
        options.waiting = weft::Waiting::spin;
        listening.emplace(options, "0.0.0.0", port);
    }
    weft::Server& server = *listening;
    std::cout << server.selection().report() << "listening on port " << server.port() << " ("
              << t.g.slots << " slots of " << t.g.slot_size() << " B)" << std::endl;

    // Where a provider gives each client a Node of its own (shm), the table is registered
    // on each: one registration per Node, not per client.
    std::map<weft::Node*, PerNode> nodes;
    std::map<std::pair<weft::Node*, std::uint32_t>, Client> clients; // by Node and PeerId
    std::uint64_t served = 0;
    std::uint64_t naps = 0, overslept = 0; // sleeps, and those no descriptor ended (1 ms each)
    char replied = 0; // the replies' context
    const auto answer = [&](weft::Node& node, const weft::Completion& n) {
        const auto it = clients.find({&node, n.peer.index});
        if (n.op != weft::Op::notify || it == clients.end() || n.data >= t.g.depth)
            return;
        Client& cl = it->second;
        const std::byte* r = cl.requests->data() + n.data * t.g.request_size();
        std::uint16_t klen;
        std::uint32_t vlen;
        std::memcpy(&klen, r + 2, 2);
        std::memcpy(&vlen, r + 4, 4);
        const auto op = static_cast<kv::Op>(r[0]);
        kv::Reply reply{}; // its padding zeroed too: nothing of this process leaves in it
        reply.lane = n.data;
        reply.status = kv::Status::bad_request;
        if (klen > 0 && klen <= t.g.key_max && vlen <= t.g.value_max &&
            (op == kv::Op::put || op == kv::Op::erase))
            reply.status = t.apply(op, {reinterpret_cast<const char*>(r + 8), klen}, {r + 8 + klen, vlen});
        std::memcpy(cl.replies->data() + n.data * sizeof reply, &reply, sizeof reply);
        try {
            node.send(n.peer, cl.replies->slice(n.data * sizeof reply, sizeof reply), &replied);
        } catch (const weft::Error& e) { // it left: swept below
            std::cerr << "weft-kv-server: client " << n.peer.index << ": " << e.what() << std::endl;
        }
        ++served;
    };
    // New clients are looked for every millisecond (a system call), lost ones every 100.
    // Idle for 200 us, the server sleeps on its Nodes' descriptors (a wake-up costs ~20 us).
    // A GET leaves no completion here, yet where the provider serves reads in the target's
    // progress (tcp) it is traffic all the same: a descriptor found ready keeps the server
    // polling too, so a client's GETs one after another do not each pay a wake-up.
    using std::chrono::microseconds, std::chrono::milliseconds;
    const int sleep_on = ::epoll_create1(EPOLL_CLOEXEC); // closed at exit
    auto accept = weft::Deadline::after(milliseconds(1));
    auto busy = weft::Deadline::after(microseconds(200));
    for (auto sweep = weft::Deadline::after(milliseconds(100)); !stopping;) {
        std::optional<weft::Connection> c;
        if (accept.expired()) {
            c = server.try_accept();
            accept = weft::Deadline::after(std::chrono::milliseconds(c ? 0 : 1));
        }
        weft::Node* greeting = c ? &c->node() : nullptr;
        if (c) try {
            PerNode& on = nodes[greeting];
            if (!on.node) {
                const std::size_t size = t.g.slots * t.g.slot_size();
                if (!t.memory) {
                    t.memory = c->node().allocate(size, weft::Access::remote_read);
                    t.bytes = std::span(t.memory->data(), size);
                }
                on = {c->node_ptr(), &t.memory->domain() == c->node().domain().get()
                                         ? t.memory
                                         : c->node().register_memory(t.bytes, weft::Access::remote_read)};
                epoll_event ev{EPOLLIN, {.ptr = on.node.get()}};
                if (on.node->fd() >= 0)
                    ::epoll_ctl(sleep_on, EPOLL_CTL_ADD, on.node->fd(), &ev);
            }
            ++on.clients;
            auto requests = c->allocate(t.g.depth * t.g.request_size(), weft::Access::remote_write);
            auto replies = c->allocate(t.g.depth * sizeof(kv::Reply), weft::Access::local);
            c->side().send(kv::Hello{t.g, on.table->remote(), requests->remote()}.encode(),
                           weft::Deadline::after(std::chrono::seconds(5)));
            const std::pair key(&c->node(), c->peer_id().index);
            clients.emplace(key, Client{std::move(*c), std::move(requests), std::move(replies)});
        } catch (const weft::Error& e) { // it left while being greeted: dropped with its Connection
            std::cerr << "weft-kv-server: a client that was connecting: " << e.what() << std::endl;
            // Its Node's entry, if this client was its first and only: gone with it.
            if (auto it = nodes.find(greeting); it != nodes.end()) {
                it->second.clients = static_cast<std::size_t>(std::count_if(
                    clients.begin(), clients.end(), [&](const auto& cl) { return cl.first.first == greeting; }));
                if (it->second.clients == 0) {
                    if (it->second.node && it->second.node->fd() >= 0)
                        ::epoll_ctl(sleep_on, EPOLL_CTL_DEL, it->second.node->fd(), nullptr);
                    nodes.erase(it);
                }
            }
        }
        // Looked at before polling: the poll below serves what is there and leaves nothing.
        epoll_event ev[16];
        bool found = options.waiting != weft::Waiting::spin && !busy.expired() &&
                     ::epoll_wait(sleep_on, ev, 16, 0) > 0;
        for (auto& [node, on] : nodes) {
            weft::Completion got[16];
            try { // a client that left fails its last replies: it is lost, and swept below
                const std::size_t n = node->poll(got);
                for (const weft::Completion& done : std::span(got, n))
                    answer(*node, done);
                found |= n > 0;
            } catch (const weft::Error& e) {
                std::cerr << "weft-kv-server: " << e.what() << std::endl;
            }
        }
        if (options.waiting == weft::Waiting::spin) {
            if (!found && busy.expired()) {
                std::this_thread::sleep_for(nodes.empty() ? microseconds(1000) : microseconds(50));
                ++naps;
            }
        } else if (!found && busy.expired() &&
                   std::ranges::all_of(nodes, [](auto& e) { return e.second.node->trywait(); })) {
            const int ready = ::epoll_wait(sleep_on, ev, 16, 1);
            found = ready > 0;
            ++naps;
            overslept += ready == 0;
        }
        if (found)
            busy = weft::Deadline::after(microseconds(200));
        if (sweep.expired()) { // clients that left: their peers are lost
            for (auto it = clients.begin(); it != clients.end();) {
                weft::Node& node = it->second.c.node();
                if (!node.is_lost(it->second.c.peer_id())) {
                    ++it;
                    continue;
                }
                it = clients.erase(it);
                if (--nodes[&node].clients == 0) { // its table goes (a Node of its own: the Node too)
                    if (node.fd() >= 0)
                        ::epoll_ctl(sleep_on, EPOLL_CTL_DEL, node.fd(), nullptr);
                    nodes.erase(&node);
                }
            }
            sweep = weft::Deadline::after(milliseconds(100));
        }
    }
    std::cout << "served " << served << " requests; slept " << naps << " times, " << overslept
              << " of them a full 1 ms on the descriptors" << std::endl;
    return 0;
} catch (const std::exception& e) {
    std::cerr << "weft-kv-server: " << e.what() << "\n";
    return 1;
}
