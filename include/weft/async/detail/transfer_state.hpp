// SPDX-License-Identifier: MIT
/// @brief A Transfer's state, owned by the Transfer and held apart from it so
/// that a moved Transfer keeps its contexts, and the awaitable of
/// Transfer::done(). Included by weft/async/transfer.hpp; not a header of its own.
#pragma once

#include <vector>

#include "weft/async/transfer.hpp"

namespace weft::detail {

class TransferState final : public Sink {
public:
    struct Entry {
        TransferEntry e;
        Slot* slot = nullptr;       // its context (nullptr: abandoned by a lost peer; taken again)
        std::uint32_t target = 0;   // index into targets
    };
    struct Target {
        PeerId peer;
        std::uint32_t entries = 0;  // its entries
        std::uint32_t last = 0;     // its last entry
        std::uint32_t left = 0;     // its entries not completed in this post
        bool piggyback = false;     // the notification rides on the last write
        bool ordered_note = false;  // a payload note may follow the writes at once (SAW)
        bool failed = false;        // an entry of this post failed: no notification
        bool lane = false;          // on the same-host lane: no FI_MORE chains, no endpoint calls
        Slot* note = nullptr;       // the separate notification's context
    };

    TransferState(std::shared_ptr<Node> node, Direction direction, Notify notify);
    ~TransferState();

    void completed(std::uint32_t index, const Completion& c,
                   const std::exception_ptr& error) noexcept override;
    void post();
    bool finished() const noexcept
    {
        return state == Transfer::State::done || state == Transfer::State::failed;
    }

    std::shared_ptr<Node> node;
    Direction direction;
    Notify notify;
    std::vector<Entry> entries;
    std::vector<Target> targets;
    std::vector<PeerId> target_ids;
    std::shared_ptr<MemoryRegion> payload_mr; // the note's payload (registered)
    std::size_t payload_len = 0;
    Transfer::State state = Transfer::State::idle;
    std::size_t remaining = 0;
    std::size_t failed_entry = Transfer::Status::npos;
    std::exception_ptr error;
    Waiter* waiter = nullptr; // the TransferAwait or the blocking wait, while it waits

private:
    Slot* slot_of(std::uint32_t index, PeerId peer);
    void post_entry(std::uint32_t i);
    bool chained(std::uint32_t i) const noexcept;
    void post_note(std::uint32_t t) noexcept;
    void note_due(std::uint32_t t) noexcept;
    void fail(std::uint32_t index, const std::exception_ptr& e) noexcept;
    void one_done() noexcept;
};

class [[nodiscard]] TransferAwait final : public Waiter, private AwaitBase {
public:
    TransferAwait(TransferState& state, Deadline until, std::stop_token stop)
        : AwaitBase(*state.node, until, std::move(stop)), state_(&state)
    {
    }
    ~TransferAwait();
    TransferAwait(const TransferAwait&) = delete;
    TransferAwait& operator=(const TransferAwait&) = delete;

    bool await_ready();
    void await_suspend(std::coroutine_handle<> h);
    void await_resume();

private:
    friend class TransferState;
    void give_up(Early why) noexcept override;
    TransferState* state_; // nullptr once the Transfer is gone
};

} // namespace weft::detail
