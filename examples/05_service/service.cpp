// Lesson 5: a service on etcd whose members come and go. The service leases its Node's
// address and watches members/: each member that appears becomes a peer with an inbox of
// its own to write blocks into; one whose key goes (it left, or died) is removed. Run:
//   WEFT_ETCD=127.0.0.1:2379 weft-service serve [SECONDS] | join NAME [BLOCKS] [stay]
#include <weft/etcd_store.hpp>
#include <weft/node.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>

using namespace std::chrono_literals;

constexpr std::uint32_t block = 4096, blocks_max = 16; // a member's inbox holds 16 blocks

// Byte i of member `name`'s block k (std::hash is the same in every process of this binary).
static std::byte expected(const std::string& name, std::size_t k, std::size_t i)
{
    return static_cast<std::byte>(std::hash<std::string>{}(name) + k * 31 + i * 7);
}

static volatile std::sig_atomic_t stopping = 0;

static int serve(weft::EtcdStore& store, std::chrono::seconds length)
{
    for (const int s : {SIGTERM, SIGINT})
        std::signal(s, [](int) { stopping = 1; });
    auto node = weft::Node::open();
    store.set_while_alive("server/node", node->address().encode());
    auto changes = store.watch("members/", weft::Deadline::after(10s));
    std::cout << "serving on " << node->provider() << "; " << node->selection().report()
              << std::endl;
    struct Member {
        std::string name;
        std::shared_ptr<weft::MemoryRegion> inbox;
    };
    std::map<std::uint32_t, Member> members; // by PeerId index: a notification's peer
    int wrong = 0;
    const auto take = [&] { // the notifications here now: check the block each names
        while (const auto c = node->poll_one()) {
            if (c->op != weft::Op::notify)
                continue;
            const auto m = members.find(c->peer.index); // none: not a member (any more)
            const std::string who = m == members.end() ? "?" : m->second.name;
            bool ok = m != members.end() && c->data < blocks_max;
            for (std::size_t i = 0; ok && i < block; ++i)
                ok = m->second.inbox->data()[c->data * block + i] == expected(who, c->data, i);
            wrong += !ok;
            std::cout << "member " << who << ": block " << c->data
                      << (ok ? " verified" : " WRONG") << std::endl;
        }
    };
    for (const auto end = weft::Deadline::after(length); !stopping && !end.expired();) {
        take();
        const auto change = changes.next(weft::Deadline::after(5ms));
        if (!change)
            continue;
        take(); // a member's last blocks are here before it leaves (its flush)
        const std::string name = change->key.substr(std::string_view("members/").size());
        const auto known = std::ranges::find(members, name, [](auto& m) { return m.second.name; });
        if (change->kind == weft::EtcdEvent::Kind::put && known == members.end()) {
            const weft::PeerId peer = node->add_peer(weft::NodeAddress::decode(change->value));
            // Readable too: the member's flush reads it (below, in join).
            auto inbox = node->allocate(blocks_max * block, weft::Access::remote_read_write);
            store.set("admitted/" + name, inbox->remote().encode()); // once it is a peer
            members[peer.index] = {name, std::move(inbox)};
            std::cout << "member " << name << " joined" << std::endl;
        } else if (change->kind == weft::EtcdEvent::Kind::erase && known != members.end()) {
            node->remove_peer(weft::PeerId{known->first}); // its connection first,
            members.erase(known);                          // then the memory it reached
            store.erase("admitted/" + name);
            std::cout << "member " << name << " left" << std::endl;
        }
    }
    std::cout << "service ends: " << (wrong == 0 ? "every block verified" : "WRONG blocks")
              << std::endl;
    return wrong == 0 ? 0 : 1;
}

static int join(weft::EtcdStore& store, const std::string& name, std::uint32_t blocks, bool stay)
{
    const auto soon = [] { return weft::Deadline::after(30s); };
    const auto server = weft::NodeAddress::decode(store.get("server/node", soon()));
    auto node = weft::Node::open_like({}, server);
    const weft::PeerId peer = node->add_peer(server);
    store.set_while_alive("members/" + name, node->address().encode());
    const auto inbox = weft::RemoteRegion::decode(store.get("admitted/" + name, soon()));
    auto src = node->allocate(block, weft::Access::local);
    for (std::uint32_t k = 0; k < std::min(blocks, blocks_max); ++k) {
        for (std::size_t i = 0; i < block; ++i)
            src->data()[i] = expected(name, k, i);
        int ctx = 0;
        node->write_notify(peer, src->all(), inbox, k * block, /*value=*/k, &ctx);
        node->wait(&ctx, soon());
    }
    // A read ordered behind the writes: they, and their notifications, are at the
    // service before this member's key can go.
    node->endpoint(peer).flush(inbox, node->fabric_peer(peer), soon());
    std::cout << "member " << name << ": wrote " << std::min(blocks, blocks_max) << " blocks"
              << std::endl;
    if (stay) { // until killed: the service sees this member go when its lease expires
        std::cout << "READY" << std::endl;
        std::this_thread::sleep_for(300s);
    }
    return 0; // the store's destructor revokes the lease: the service sees this member go
}

int main(int argc, char** argv)
{
    const char* etcd = std::getenv("WEFT_ETCD");
    const std::string mode = argc > 1 ? argv[1] : "";
    if (!etcd || (mode != "serve" && !(mode == "join" && argc > 2))) {
        std::cerr << "usage: WEFT_ETCD=host:port " << argv[0]
                  << " serve [SECONDS] | join NAME [BLOCKS] [stay]\n";
        return 2;
    }
    const char* service = std::getenv("WEFT_SERVICE"); // keys under weft-service/<it>/
    try {
        weft::EtcdStore store(etcd, weft::Deadline::after(30s),
                              std::string("weft-service/") + (service ? service : "demo") + "/");
        if (mode == "serve")
            return serve(store, std::chrono::seconds(argc > 2 ? std::stoi(argv[2]) : 60));
        const auto blocks = static_cast<std::uint32_t>(argc > 3 ? std::stoul(argv[3]) : 4);
        return join(store, argv[2], blocks, argc > 4 && std::string(argv[4]) == "stay");
    } catch (const std::exception& e) {
        std::cerr << argv[0] << ": " << e.what() << "\n";
        return 1;
    }
}
