// SPDX-License-Identifier: MIT
// weft-peers-bench's pieces: a hub process with N peer processes, on weft's
// Node (peers_main.cpp) and on raw libfabric (peers_raw.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "child.hpp"
#include "weft/base/detail/fd.hpp"
#include "weft/weft.hpp"

namespace weft::peers {

struct Config {
    std::string provider;
    EndpointKind kind = EndpointKind::rdm;
    bool aggregate = false;
    bool polling = false; ///< weft: Progress::polling (no progress thread)
    bool lane = false;    ///< weft: Options::same_host = lane (raw stays on the provider)
};

/// This process's resident memory, open descriptors and threads.
struct Usage {
    std::size_t rss_kib = 0;
    std::size_t fds = 0;
    std::size_t threads = 0;
    static Usage now();
};

struct Result {
    double ms = 0; ///< from the release of the peers to every peer answered
    Usage start;   ///< the hub process before it opened anything
    Usage before;  ///< the hub with its Node (endpoint) open and progressed once, no peer yet
    Usage after;   ///< every peer reached
    double write_mb_s = 0, messages_s = 0, reads_s = 0; ///< --aggregate
};

/// One end of a socket pair between the hub and a peer process: each side
/// sends length-prefixed byte strings, then the peer says done, the hub dismisses.
class Channel {
public:
    explicit Channel(int fd) : fd_(fd) {}
    void send_bytes(std::span<const std::byte> b);
    std::vector<std::byte> receive_bytes();
    int fd() const noexcept { return fd_.get(); }
    bool dismissed(); ///< peer: the hub said it may go (waits up to 1 ms for the word)
    void dismiss();   ///< hub

private:
    weft::detail::Fd fd_;
};

/// A peer process as the hub sees it: its channel and its address.
struct Child {
    Channel channel;
    detail::Child process;
    std::vector<std::byte> address;
    void release(std::span<const std::byte> hub) { channel.send_bytes(hub); }
    void dismiss() { channel.dismiss(); }
};

/// The hub as a passive target: runs `progress` until every child has said
/// its writes are done (and reads those words); throws when `deadline` passes.
/// `nap`: how long it waits for their words between two progress calls.
void await_done(std::vector<Child>& children, const std::function<void()>& progress,
                Deadline deadline, std::chrono::microseconds nap = {});


/// --aggregate: N clients writing, then sending, then reading, into one hub.
/// The same pattern for weft and raw libfabric: each client writes `writes` x
/// `chunk` bytes into its own slot of the hub's region, then sends `messages`
/// 8 B messages, `window` in flight, then reads `reads` x 64 B of its slot one
/// at a time (a GET's read); the hub says go on the channel, the client done.
namespace traffic {
inline constexpr std::size_t chunk = 64 * 1024;
inline constexpr int writes = 1000;
inline constexpr int messages = 20000;
inline constexpr int window = 16;
inline constexpr int reads = 20000;
inline constexpr std::size_t read_size = 64;
inline constexpr std::chrono::microseconds shm_read_nap{50}; // as weft-kv-server's idle nap
inline const std::vector<std::byte> go_writes{std::byte{'w'}};
inline const std::vector<std::byte> go_messages{std::byte{'m'}};
inline const std::vector<std::byte> go_reads{std::byte{'r'}};
} // namespace traffic
struct Traffic {
    double write_mb_s = 0;
    double messages_s = 0;
    double reads_s = 0;
};
/// While the clients read, the hub progresses without a pause, or, with
/// `read_nap` (shm), once per nap: a shm read of one range is the reader's
/// process_vm_readv, but it leaves a command in the hub's queue, which the hub
/// must take back, and a hub that polls takes the region lock every read
/// waits for. The KV server naps as long when idle.
Traffic traffic_hub(Node& node, std::vector<Child>& children, std::chrono::microseconds read_nap);
void traffic_child(Node& node, PeerId hub, Channel& channel, std::uint32_t index);

Result raw_hub(const Config& c, std::vector<Child>& children);
int raw_child(const Config& c, Channel& hub, std::uint32_t index);

} // namespace weft::peers
