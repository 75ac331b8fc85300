// SPDX-License-Identifier: MIT
// The loop of weft's own blocking waits on awaited work: dispatch, then sleep
// on the Node's descriptor or spin, bounded by the deadline.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "weft/async/loop.hpp"
#include "weft/base/error.hpp"
#include "weft/peers/node.hpp"

namespace weft::detail {

void Loop::turn(Deadline deadline, const char* what)
{
    if (node_.dispatch() > 0) {
        empty_ = 0;
        return;
    }
    if (deadline.expired())
        throw TimeoutError("wait", -FI_ETIMEDOUT, std::string(node_.provider()),
                           fmt::format("{} did not come before the deadline; what was posted "
                                       "still flies (its buffers are the caller's again once "
                                       "Node::drained(peer)); is the peer alive?",
                                       what));
    ++empty_;
    if (node_.fd() >= 0) {
        // Level-triggered, and trywait() right before the sleep: nothing that
        // arrived since the dispatch above is slept through.
        if (node_.trywait()) {
            auto until = std::min(deadline.when(), node_.dispatcher().next_deadline().when());
            until = std::min(until, Clock::now() + std::chrono::milliseconds(100));
            node_.sleep(Deadline(until));
        }
        return;
    }
    if (empty_ % 128 == 0) // spun a while: let another thread have the core
        std::this_thread::yield();
}

void Loop::no_task()
{
    throw UsageError("run", -FI_EINVAL, "", "the Task is empty (moved from)");
}

} // namespace weft::detail
