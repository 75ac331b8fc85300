// SPDX-License-Identifier: MIT
// A target Node in a process of its own for weft-async-bench's instruction
// cells: under callgrind, a target thread of the measured process runs only
// when valgrind schedules it (one thread at a time), so the posting thread
// spins until then (shm: its command queue to the target is full). A target
// started with exec runs natively (valgrind follows no exec by default) and
// progresses on the other core, as a peer process does in real use. The
// socket-pair channel and the spawn are weft-peers-bench's (peers.hpp).
#pragma once

#include <memory>

#include "peers.hpp"

namespace weft::bench {

class RemoteTarget {
public:
    /// Starts `self --serve` (this executable) with the channel as its fd 3, hands
    /// it `hub`'s address and adds it as a peer of `hub`, with a region of `size`
    /// bytes it allows writes to.
    RemoteTarget(const char* self, const std::shared_ptr<Node>& hub, const Options& options,
                 std::size_t size);
    RemoteTarget(const RemoteTarget&) = delete;
    RemoteTarget& operator=(const RemoteTarget&) = delete;

    PeerId id{};
    RemoteRegion region{};

private:
    detail::Child process_; // killed and reaped last
    peers::Channel channel_{-1};
};

/// The target's side (`self --serve PROVIDER KIND SIZE`): reads the hub's address
/// from its channel, answers with its own and its region's, and progresses until
/// the channel closes.
int serve(int argc, char** argv);

} // namespace weft::bench
