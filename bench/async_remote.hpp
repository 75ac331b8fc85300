// SPDX-License-Identifier: MIT
// A target Node in a process of its own for weft-async-bench's instruction
// cells: under callgrind, a target thread of the measured process runs only
// when valgrind schedules it (one thread at a time), so the posting thread
// spins until then (shm: its command queue to the target is full). A target
// started with exec runs natively (valgrind follows no exec by default) and
// progresses on the other core, as a peer process does in real use.
#pragma once

#include <sys/types.h>

#include <memory>

#include "weft/peers/node.hpp"

namespace weft::bench {

class RemoteTarget {
public:
    /// Starts `self --serve` (this executable), hands it `hub`'s address and
    /// adds it as a peer of `hub`, with a region of `size` bytes it allows writes to.
    RemoteTarget(const char* self, const std::shared_ptr<Node>& hub, const Options& options,
                 std::size_t size);
    /// Closes its pipe (it ends) and waits for it.
    ~RemoteTarget();
    RemoteTarget(const RemoteTarget&) = delete;
    RemoteTarget& operator=(const RemoteTarget&) = delete;

    PeerId id{};
    RemoteRegion region{};

private:
    pid_t pid_ = -1;
    int to_ = -1;
    int from_ = -1;
};

/// The target's side (`self --serve PROVIDER KIND SIZE`): reads the hub's address
/// from stdin, answers with its own and its region's, and progresses until stdin closes.
int serve(int argc, char** argv);

} // namespace weft::bench
