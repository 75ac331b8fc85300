// SPDX-License-Identifier: MIT
// RemoteTarget: a target process on weft-peers-bench's channel, and its serving loop.
#include "async_remote.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <stdexcept>
#include <string>

namespace weft::bench {

RemoteTarget::RemoteTarget(const char* self, const std::shared_ptr<Node>& hub, const Options& options,
                           std::size_t size)
{
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        throw std::runtime_error("remote target: socketpair failed");
    channel_ = peers::Channel(sv[0]);
    const detail::Fd theirs(sv[1]);
    process_ = detail::Child::spawn(
        {.argv = {self, "--serve", options.provider,
                  options.kind == EndpointKind::rdm ? "rdm" : "msg", std::to_string(size)},
         .fds = {{theirs.get(), 3}}});
    channel_.send_bytes(hub->address().encode());
    id = hub->add_peer(NodeAddress::decode(channel_.receive_bytes()));
    region = RemoteRegion::decode(channel_.receive_bytes());
}

int serve(int argc, char** argv)
{
    if (argc < 5)
        return 2;
    Options o;
    o.provider = argv[2];
    o.kind = std::string(argv[3]) == "rdm" ? EndpointKind::rdm : EndpointKind::msg;
    o.allow_shm = true;
    o.node = "127.0.0.1";
    peers::Channel hub(3);
    const auto hub_address = NodeAddress::decode(hub.receive_bytes());
    auto node = Node::open_like(o, hub_address);
    auto region = node->allocate(std::stoul(argv[4]), Access::remote_write);
    (void)node->add_peer(hub_address);
    hub.send_bytes(node->address().encode());
    hub.send_bytes(region->remote().encode());
    std::array<Completion, 16> drop;
    for (std::uint32_t spins = 0;; ++spins) {
        (void)node->poll(drop); // takes the notifications too
        if ((spins & 4095) == 0) {
            pollfd p{hub.fd(), POLLIN, 0};
            if (::poll(&p, 1, 0) > 0) // EOF: the hub is done
                return 0;
        }
    }
}

} // namespace weft::bench
