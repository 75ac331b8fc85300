// SPDX-License-Identifier: MIT
/// @brief The progress thread: keeps passive targets moving on providers that
/// move data only while their completion queue is read.
///
/// When to use which (see weft::Progress):
/// - The application polls its endpoints all the time (ping-pong, benchmarks,
///   an event loop): Progress::polling. No thread, lowest latency.
/// - A passive RMA target (it exposes memory and does other work) on a provider
///   that needs its CQ read (tcp;ofi_rxm, shm, ofi_rxd; tcp and net in libfabric
///   1.17 despite reporting AUTO): a progress thread, so initiators never stall.
///   Progress::automatic (the default) starts one exactly there, and says so.
/// - Progress::thread forces one on every provider.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "weft/fabric/completion_queue.hpp"

namespace weft {

/// Counts an owner's polls; the progress thread stays out of the way while it moves.
/// Written by one thread, read by the progress thread: plain relaxed stores.
class Activity {
public:
    void note() noexcept { n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
    std::uint64_t count() const noexcept { return n_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> n_{0};
};

/// Every `interval`, drives progress on `cq` (CompletionQueue::progress, which
/// takes no completions out of the queue) unless `activity` shows the owner
/// polled since the last check. A queue with a descriptor (Waiting::sleep)
/// lets it sleep while nothing is pending and the owner is idle. The queue's domain must be FI_THREAD_SAFE (weft
/// opens it so when it plans a thread).
class ProgressThread {
public:
    ProgressThread(std::shared_ptr<CompletionQueue> cq, const Activity& activity,
                   std::chrono::microseconds interval, std::optional<int> cpu = std::nullopt);
    ~ProgressThread(); // stop(grace)
    ProgressThread(const ProgressThread&) = delete;
    ProgressThread& operator=(const ProgressThread&) = delete;

    /// Stops the thread and joins it. False when it did not finish within
    /// `grace`: it is stuck inside the provider (shm, when a peer was killed
    /// holding a lock in shared memory, spins forever); it is then detached and
    /// keeps the completion queue (and its domain) open for good, and the
    /// caller must not close what the provider may still touch. Idempotent.
    bool stop(std::chrono::milliseconds grace);
    static constexpr std::chrono::milliseconds grace{2000};

    /// How many times the thread drove progress itself (for tests and reports).
    std::uint64_t drives() const noexcept { return state_->drives.load(std::memory_order_relaxed); }

private:
    // Shared with the thread, which may outlive this object (see stop()).
    struct State {
        std::shared_ptr<CompletionQueue> cq;
        std::atomic<std::uint64_t> drives{0};
        std::atomic<bool> done{false};
    };
    std::shared_ptr<State> state_;
    std::jthread thread_;
    std::optional<bool> stopped_; // stop()'s answer, once given
};

} // namespace weft
