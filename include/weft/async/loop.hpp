// SPDX-License-Identifier: MIT
/// @brief The loop weft's blocking calls on awaited work run (node.run(task),
/// Transfer::wait): dispatch, then sleep on the Node's descriptor
/// (Waiting::sleep) or spin and yield as the Node's waits do, until the
/// deadline. Also what an application's own epoll loop does, written out in
/// docs/async.md.
#pragma once

#include <cstdint>

#include "weft/base/deadline.hpp"

namespace weft {
class Node;
}

namespace weft::detail {

class Loop {
public:
    explicit Loop(Node& node) noexcept : node_(node) {}
    /// One dispatch, and a sleep or a spin when it found nothing; TimeoutError
    /// naming `what` once `deadline` passed.
    void turn(Deadline deadline, const char* what);
    [[noreturn]] static void no_task();

private:
    Node& node_;
    std::uint32_t empty_ = 0; // dispatches in a row that found nothing
};

} // namespace weft::detail
