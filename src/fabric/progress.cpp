// SPDX-License-Identifier: MIT
#include "weft/fabric/progress.hpp"
#include "check.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {

ProgressThread::ProgressThread(std::shared_ptr<CompletionQueue> cq, const Activity& activity,
                               std::chrono::microseconds interval, std::optional<int> cpu)
    : state_(std::make_shared<State>())
{
    state_->cq = std::move(cq);
    // After a stop request the thread touches only `state` (shared) and its
    // stop token: the owner and `activity` may be gone by then (stop()).
    thread_ = std::jthread([state = state_, &activity, interval](std::stop_token stop) {
        pthread_setname_np(pthread_self(), "weft-progress");
        std::uint64_t seen = activity.count();
        auto nap = interval; // grows while a descriptor that does not hold keeps it awake
        for (;;) {
            // With a descriptor, nothing pending and the owner idle: sleep
            // until something arrives (a stop is seen within 100 ms).
            if (state->cq->fd() < 0 || activity.count() != seen || !state->cq->trywait()) {
                std::this_thread::sleep_for(interval);
            } else {
                const auto before = std::chrono::steady_clock::now();
                const bool capped = state->cq->sleep_capped();
                (void)state->cq->sleep(100);
                // A descriptor that stays readable (net, once connected), or
                // one that misses data (ofi_rxm, whose sleeps are capped): nap
                // instead, longer while nothing happens, up to 10 / 50 ms.
                if (capped) {
                    std::this_thread::sleep_for(nap);
                    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(50));
                } else if (std::chrono::steady_clock::now() - before < std::chrono::microseconds(50)) {
                    std::this_thread::sleep_for(nap);
                    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
                } else {
                    // Woken by an arrival: an owner asleep on the same descriptor
                    // (Node::sleep, an event loop) woke too and takes it; the
                    // thread looks an interval later, and only if the owner did
                    // not (racing it costs both a lock and a wake-up).
                    nap = interval;
                    std::this_thread::sleep_for(interval);
                }
            }
            if (stop.stop_requested())
                break;
            const std::uint64_t now = activity.count();
            if (now != seen) { // the owner is polling: progress happens there
                seen = now;
                nap = interval;
                continue;
            }
            state->cq->progress();
            if (state->cq->fd() >= 0 && !state->cq->trywait())
                state->cq->signal(); // something arrived: wake an owner asleep on fd()
            state->drives.store(state->drives.load(std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
        }
        state->done.store(true, std::memory_order_release);
    });
    if (cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(*cpu, &set);
        if (const int err = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set))
            detail::log_warning(fmt::format("progress thread: cannot pin to CPU {}: errno {}",
                                            *cpu, err));
    }
}

bool ProgressThread::stop(std::chrono::milliseconds grace_period)
{
    if (!stopped_) {
        thread_.request_stop();
        const auto until = std::chrono::steady_clock::now() + grace_period;
        while (!state_->done.load(std::memory_order_acquire) &&
               std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        stopped_ = state_->done.load(std::memory_order_acquire);
        if (*stopped_)
            thread_.join();
        else
            thread_.detach();
    }
    return *stopped_;
}

ProgressThread::~ProgressThread()
{
    (void)stop(grace);
}

} // namespace weft
