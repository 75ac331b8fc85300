// SPDX-License-Identifier: MIT
#include "weft/progress.hpp"

#include <pthread.h>
#include <sched.h>

#include <fmt/format.h>

#include "weft/error.hpp"

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
        for (;;) {
            std::this_thread::sleep_for(interval);
            if (stop.stop_requested())
                break;
            const std::uint64_t now = activity.count();
            if (now != seen) { // the owner is polling: progress happens there
                seen = now;
                continue;
            }
            state->cq->progress();
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
