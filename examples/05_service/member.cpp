// Lesson 5, member: joins the service as NAME, writes BLOCKS blocks into the inbox the service
// gave it, each with a notification, and leaves; with "stay" it stays until killed (the
// service sees it go once its lease expires). Run: weft-service-member NAME [BLOCKS] [stay].
#include <weft/groups/members.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <thread>

#include "blocks.hpp"

int main(int argc, char** argv)
try {
    if (argc < 2) {
        std::cerr << "usage: WEFT_ETCD=host:port " << argv[0] << " NAME [BLOCKS] [stay]\n";
        return 2;
    }
    const std::string name = argv[1];
    const auto blocks = std::min(argc > 2 ? std::stoi(argv[2]) : 4, int{blocks_max});
    auto store = std::make_shared<weft::EtcdStore>(etcd(), soon(), service_prefix());
    // Members open their Node like the service's (its provider and endpoint kind).
    const auto at = weft::NodeAddress::decode(store->get("members/service", soon()));
    auto node = weft::Node::open_like({}, at);
    weft::Members members(store, node, "members/", name, soon());
    const weft::PeerId service = members.wait_for("service", soon());
    const auto inbox = weft::RemoteRegion::decode(store->get("inbox/" + name, soon()));
    auto src = node->allocate(block, weft::Access::local);
    for (std::uint32_t k = 0; k < std::uint32_t(blocks); ++k) {
        fill_block(src->data(), name, k);
        int ctx = 0;
        node->write_notify(service, src->all(), inbox, k * block, /*value=*/k, &ctx);
        node->wait(&ctx, soon());
    }
    node->flush(service, inbox, soon()); // the blocks and notifications are there before it leaves
    std::cout << "member " << name << ": wrote " << blocks << " blocks" << std::endl;
    if (argc > 3 && std::string(argv[3]) == "stay") {
        std::cout << "READY" << std::endl;
        std::this_thread::sleep_for(std::chrono::minutes(5));
    }
    return 0; // ~Members erases this member's key: the service sees it leave at once
} catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
}
