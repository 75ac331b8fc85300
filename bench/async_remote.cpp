// SPDX-License-Identifier: MIT
// RemoteTarget: the pipes to a target process and the target's serving loop.
#include "async_remote.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace weft::bench {
namespace {

void write_all(int fd, const void* p, std::size_t n)
{
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, b, n);
        if (w <= 0)
            throw std::runtime_error("remote target: its pipe closed");
        b += w;
        n -= static_cast<std::size_t>(w);
    }
}

void read_all(int fd, void* p, std::size_t n)
{
    auto* b = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t r = ::read(fd, b, n);
        if (r <= 0)
            throw std::runtime_error("remote target: it ended before answering (see its stderr)");
        b += r;
        n -= static_cast<std::size_t>(r);
    }
}

void send_bytes(int fd, std::span<const std::byte> bytes)
{
    const auto n = static_cast<std::uint32_t>(bytes.size());
    write_all(fd, &n, sizeof n);
    write_all(fd, bytes.data(), bytes.size());
}

std::vector<std::byte> receive_bytes(int fd)
{
    std::uint32_t n = 0;
    read_all(fd, &n, sizeof n);
    if (n > (1u << 20))
        throw std::runtime_error("remote target: an oversized message");
    std::vector<std::byte> bytes(n);
    read_all(fd, bytes.data(), n);
    return bytes;
}

const char* kind_name(std::optional<EndpointKind> k) { return k == EndpointKind::rdm ? "rdm" : "msg"; }

} // namespace

RemoteTarget::RemoteTarget(const char* self, const std::shared_ptr<Node>& hub, const Options& options,
                           std::size_t size)
{
    int down[2], up[2];
    if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0)
        throw std::runtime_error("remote target: pipe2 failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, down[0], 0);
    posix_spawn_file_actions_adddup2(&fa, up[1], 1);
    const std::string bytes = std::to_string(size);
    const char* argv[] = {self, "--serve", options.provider.c_str(), kind_name(options.kind),
                          bytes.c_str(), nullptr};
    const int rc = posix_spawn(&pid_, self, &fa, nullptr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(down[0]);
    ::close(up[1]);
    to_ = down[1];
    from_ = up[0];
    if (rc != 0)
        throw std::runtime_error("remote target: posix_spawn of " + std::string(self) + " failed");
    send_bytes(to_, hub->address().encode());
    const auto address = receive_bytes(from_);
    const auto wire = receive_bytes(from_);
    id = hub->add_peer(NodeAddress::decode(address));
    region = RemoteRegion::decode(wire);
}

RemoteTarget::~RemoteTarget()
{
    ::close(to_); // the target sees EOF and ends
    ::close(from_);
    int status = 0;
    (void)::waitpid(pid_, &status, 0);
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
    const auto hub_address = NodeAddress::decode(receive_bytes(0));
    auto node = Node::open_like(o, hub_address);
    auto region = node->allocate(std::stoul(argv[4]), Access::remote_write);
    (void)node->add_peer(hub_address);
    send_bytes(1, node->address().encode());
    const auto wire = region->remote().encode();
    send_bytes(1, wire);
    std::array<Completion, 16> drop;
    for (std::uint32_t spins = 0;; ++spins) {
        (void)node->poll(drop); // takes the notifications too
        if ((spins & 4095) == 0) {
            pollfd p{0, POLLIN, 0};
            if (::poll(&p, 1, 0) > 0) // EOF: the hub is done
                return 0;
        }
    }
}

} // namespace weft::bench
