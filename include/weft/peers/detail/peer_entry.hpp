// SPDX-License-Identifier: MIT
/// @brief A Node's record of one peer (private to Node; out of node.hpp for
/// its length). Included at the end of weft/peers/node.hpp.
#pragma once

#include "weft/peers/node.hpp"

namespace weft {

struct Node::PeerEntry {
    enum class State : std::uint8_t { added, connecting, accepting, ready, lost, removed };
    State state = State::added;
    std::optional<NodeAddress> address;
    std::uint64_t instance = 0;
    fi_addr_t addr = FI_ADDR_UNSPEC; // RDM
    std::shared_ptr<Endpoint> ep;    // MSG: the connection; RDM: the Node's endpoint
    const void* fid = nullptr;       // MSG: ep's fid, its key in by_fid_ (ep may be closed)
    std::string why;                 // lost: what happened
    std::vector<std::byte> credential; // MSG: presented in our connection request
    int clashes = 0;                 // MSG: connects retried after an iWARP port clash
    std::string refusal;             // MSG: a refused access to report once (drop)
    Clock::time_point refused_at;    // MSG: when drop() noted it
    bool established = false;        // MSG: FI_CONNECTED arrived
    std::uint64_t writes_flushed = 0; // lane: the endpoint's writes_posted() at its last flush
};

} // namespace weft
