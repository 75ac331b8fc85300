// SPDX-License-Identifier: MIT
// weft-test-async-target: a target of the async tests' kill test. It opens a
// Node like the hub's, exposes a region, connects to the test's side port
// (which the test watches: its close is this process's end), prints
// "READY <node address> <region>" (hex), and serves until killed.
//   usage: weft-test-async-target PROVIDER msg|rdm ADDRESS HUB_HEX SIDE_PORT SIZE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/hex.hpp"
#include "weft/weft.hpp"
#include "support/die_with_parent.hpp"

using namespace weft;
using weft::test::hex;
using weft::test::unhex;

int main(int argc, char** argv)
{
    weft::test::die_with_parent();
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s PROVIDER msg|rdm ADDRESS HUB_HEX SIDE_PORT SIZE\n", argv[0]);
        return 2;
    }
    try {
        Options o;
        o.provider = argv[1];
        o.kind = std::string(argv[2]) == "msg" ? EndpointKind::msg : EndpointKind::rdm;
        o.allow_shm = true;
        o.node = argv[3];
        const NodeAddress hub_address = NodeAddress::decode(unhex(argv[4]));
        auto node = Node::open_like(o, hub_address);
        (void)node->add_peer(hub_address);
        auto region = node->allocate(std::stoul(argv[6]), Access::remote_read_write);
        const int side = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in at{};
        at.sin_family = AF_INET;
        at.sin_port = htons(static_cast<std::uint16_t>(std::stoul(argv[5])));
        at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (side < 0 || ::connect(side, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
            std::perror("side channel");
            return 1;
        }
        const auto wire = region->remote().encode();
        std::printf("READY %s %s\n", hex(node->address().encode()).c_str(), hex(wire).c_str());
        std::fflush(stdout);
        for (;;)
            (void)node->dispatch(); // serves until killed
    } catch (const std::exception& e) {
        std::fprintf(stderr, "weft-test-async-target: %s\n", e.what());
        return 1;
    }
}
