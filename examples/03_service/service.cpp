// Lesson 3: a long-lived service on etcd whose members come and go. The
// service publishes its Node's address and an inbox under its etcd lease and
// watches the members' prefix: each member that appears (at any time) is
// added as a peer and given a slot, and writes blocks into its slot with a
// notification; each member that leaves, or dies and whose lease expires,
// is removed. Every byte is checked.
//
//   WEFT_ETCD=127.0.0.1:2379 weft-service serve [seconds]
//   WEFT_ETCD=127.0.0.1:2379 weft-service join <name> [blocks] [stay]
//
// Keys, under weft-service/<WEFT_SERVICE or "demo">/: server/node and
// server/inbox (the service's, leased), members/<name> (a member's Node
// address, leased), admitted/<name> (its slot, set by the service).
#include <weft/etcd_store.hpp>
#include <weft/node.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <span>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 4096;
constexpr std::uint32_t slots = 64;          // members at once
constexpr std::uint32_t blocks_per_slot = 16; // a member's blocks, each in its own place

/// Block `k` of member `name`: every byte depends on both.
std::byte expected(const std::string& name, std::uint32_t k, std::size_t i)
{
    std::size_t h = 0;
    for (const char c : name)
        h = h * 131 + static_cast<unsigned char>(c);
    return static_cast<std::byte>((h + k * 31 + i * 7) & 0xff);
}

std::string text(const std::vector<std::byte>& v)
{
    return {reinterpret_cast<const char*>(v.data()), v.size()};
}

volatile std::sig_atomic_t stopping = 0;

int serve(weft::EtcdStore& store, std::chrono::seconds length)
{
    std::signal(SIGTERM, [](int) { stopping = 1; });
    std::signal(SIGINT, [](int) { stopping = 1; });
    auto node = weft::Node::open();
    auto inbox = node->allocate(slots * blocks_per_slot * block, weft::Access::remote_write);
    store.set_while_alive("server/node", node->address().encode());
    const auto region = inbox->remote().encode();
    store.set_while_alive("server/inbox", std::span<const std::byte>(region));
    auto members = store.watch("members/", weft::Deadline::after(10s));
    std::cout << "serving on " << node->provider() << "; " << node->selection().report()
              << std::endl;

    struct Member {
        std::string name;
        weft::PeerId peer;
        std::uint32_t slot;
    };
    std::map<std::string, Member> by_name;
    std::map<std::uint32_t, std::string> by_peer; // PeerId index -> name (kept after it leaves)
    std::vector<bool> used(slots);
    int wrong = 0;
    // Takes the notifications that have arrived and checks the block each names.
    const auto take = [&] {
        weft::Completion done[16];
        while (const std::size_t n = node->poll(done))
            for (const weft::Completion& c : std::span(done, n)) {
                if (c.op != weft::Op::notify)
                    continue;
                const auto it = by_peer.find(c.peer.index);
                const std::string who = it == by_peer.end() ? "?" : it->second;
                const std::uint32_t slot = c.data >> 16, k = c.data & 0xffff;
                const std::size_t at = (slot * blocks_per_slot + k) * block;
                bool ok = slot < slots && k < blocks_per_slot && who != "?";
                for (std::size_t i = 0; ok && i < block; ++i)
                    ok = inbox->data()[at + i] == expected(who, k, i);
                wrong += !ok;
                std::cout << "member " << who << ": block " << k << (ok ? " verified" : " WRONG")
                          << std::endl;
            }
    };
    const auto until = std::chrono::steady_clock::now() + length;
    while (!stopping && std::chrono::steady_clock::now() < until) {
        take();
        const auto change = members.next(weft::Deadline::after(5ms));
        if (!change)
            continue;
        take(); // a member's last blocks are in before it leaves
        const std::string name = change->key.substr(std::string("members/").size());
        if (change->kind == weft::EtcdEvent::Kind::put && !by_name.contains(name)) {
            const auto slot = static_cast<std::uint32_t>(std::ranges::find(used, false) -
                                                         used.begin());
            if (slot == slots) {
                std::cout << "member " << name << " turned away: all " << slots << " slots taken"
                          << std::endl;
                continue;
            }
            const weft::PeerId peer = node->add_peer(weft::NodeAddress::decode(change->value));
            used[slot] = true;
            by_name[name] = {name, peer, slot};
            by_peer[peer.index] = name;
            store.set("admitted/" + name, std::to_string(slot));
            std::cout << "member " << name << " joined: slot " << slot << std::endl;
        } else if (change->kind == weft::EtcdEvent::Kind::erase && by_name.contains(name)) {
            const Member m = by_name[name];
            node->remove_peer(m.peer);
            used[m.slot] = false;
            by_name.erase(name);
            store.erase("admitted/" + name);
            std::cout << "member " << name << " left" << std::endl;
        }
    }
    std::cout << "service ends: " << (wrong == 0 ? "every block verified" : "WRONG blocks")
              << std::endl;
    return wrong == 0 ? 0 : 1;
}

int join(weft::EtcdStore& store, const std::string& name, std::uint32_t blocks, bool stay)
{
    if (blocks > blocks_per_slot) {
        std::cerr << "at most " << blocks_per_slot << " blocks\n";
        return 2;
    }
    const auto wait = weft::Deadline::after(30s);
    const auto server = weft::NodeAddress::decode(store.get("server/node", wait));
    const auto inbox = weft::RemoteRegion::decode(store.get("server/inbox", wait));
    auto node = weft::Node::open_like({}, server);
    const weft::PeerId peer = node->add_peer(server);
    store.set_while_alive("members/" + name, node->address().encode());
    // The service adds this member as a peer before it gives it a slot.
    const auto slot = static_cast<std::uint32_t>(
        std::stoul(text(store.get("admitted/" + name, weft::Deadline::after(30s)))));
    auto src = node->allocate(block, weft::Access::local);
    for (std::uint32_t k = 0; k < blocks; ++k) {
        for (std::size_t i = 0; i < block; ++i)
            src->data()[i] = expected(name, k, i);
        int ctx = 0;
        const std::size_t at = (slot * blocks_per_slot + k) * block;
        node->write_notify(peer, src->slice(0, block), inbox, at, slot << 16 | k, &ctx);
        node->wait(&ctx, weft::Deadline::after(30s));
    }
    std::cout << "member " << name << ": wrote " << blocks << " blocks into slot " << slot
              << std::endl;
    if (stay) { // until killed: the service sees this member go when its lease expires
        std::cout << "READY" << std::endl;
        std::this_thread::sleep_for(300s);
    }
    return 0; // the store's destructor revokes the lease: the service sees this member go
}

} // namespace

int main(int argc, char** argv)
{
    const char* etcd = std::getenv("WEFT_ETCD");
    const std::string mode = argc > 1 ? argv[1] : "";
    if (!etcd || (mode != "serve" && !(mode == "join" && argc > 2))) {
        std::cerr << "usage: WEFT_ETCD=host:port " << argv[0]
                  << " serve [seconds] | join <name> [blocks] [stay]\n";
        return 2;
    }
    const char* service = std::getenv("WEFT_SERVICE");
    const std::string prefix = std::string("weft-service/") + (service ? service : "demo") + "/";
    try {
        weft::EtcdStore store(etcd, weft::Deadline::after(30s), prefix);
        if (mode == "serve")
            return serve(store, std::chrono::seconds(argc > 2 ? std::stoi(argv[2]) : 60));
        const auto blocks = argc > 3 ? static_cast<std::uint32_t>(std::stoul(argv[3])) : 4u;
        return join(store, argv[2], blocks, argc > 4 && std::string(argv[4]) == "stay");
    } catch (const std::exception& e) {
        std::cerr << argv[0] << ": " << e.what() << "\n";
        return 1;
    }
}
