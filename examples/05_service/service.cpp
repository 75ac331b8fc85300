// Lesson 5, service: members that come and go, on etcd. weft::Members adds each member that
// joins to the Node and removes each that leaves (its key erased, or expired with its lease);
// the service gives every member an inbox of its own and checks each block written there.
// Run: WEFT_ETCD=127.0.0.1:2379 weft-service (until Ctrl-C), then weft-service-member NAMEs.
#include <weft/groups/members.hpp>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>

#include "blocks.hpp"

static volatile std::sig_atomic_t stopping = 0;

int main()
try {
    for (const int s : {SIGTERM, SIGINT})
        std::signal(s, [](int) { stopping = 1; });
    auto store = std::make_shared<weft::EtcdStore>(etcd(), soon(), service_prefix());
    auto node = weft::Node::open();
    weft::Members members(store, node, "members/", "service", soon());
    std::cout << "serving on " << node->provider() << "; " << node->selection().report()
              << std::endl;
    std::map<std::uint32_t, std::shared_ptr<weft::MemoryRegion>> inboxes; // by PeerId index
    int wrong = 0;
    const auto take = [&] { // the notifications here now: check the block each names
        while (const auto c = node->poll_one()) {
            const auto inbox = inboxes.find(c->peer.index);
            if (c->op != weft::Op::notify || inbox == inboxes.end())
                continue;
            const bool ok = block_is(inbox->second->data(), *members.name_of(c->peer), c->data);
            wrong += !ok;
            std::cout << "member " << *members.name_of(c->peer) << ": block " << c->data
                      << (ok ? " verified" : " WRONG") << std::endl;
        }
    };
    while (!stopping) {
        take();
        const auto change = members.next(weft::Deadline::after(std::chrono::milliseconds(5)));
        if (!change || change->kind == weft::Members::Change::Kind::refused)
            continue;
        std::cout << "member " << change->name << " " << weft::to_string(change->kind) << std::endl;
        if (change->kind == weft::Members::Change::Kind::joined) { // readable: its flush reads
            auto inbox = node->allocate(blocks_max * block, weft::Access::remote_read_write);
            store->set("inbox/" + change->name, inbox->remote().encode());
            inboxes[change->peer.index] = std::move(inbox);
        } else {
            take(); // its last blocks: its flush put them here before its key went
            inboxes.erase(change->peer.index);
            store->erase("inbox/" + change->name);
        }
    }
    std::cout << "service ends: " << (wrong ? "WRONG blocks" : "every block verified") << std::endl;
    return wrong ? 1 : 0;
} catch (const std::exception& e) {
    std::cerr << "weft-service: " << e.what() << "\n";
    return 1;
}
