// SPDX-License-Identifier: MIT
#include "weft/progress.hpp"

#include <pthread.h>
#include <sched.h>

#include <fmt/format.h>

#include "weft/error.hpp"

namespace weft {

ProgressThread::ProgressThread(std::shared_ptr<CompletionQueue> cq, const Activity& activity,
                               std::chrono::microseconds interval, std::optional<int> cpu)
    : cq_(std::move(cq))
{
    thread_ = std::jthread([this, &activity, interval](std::stop_token stop) {
        pthread_setname_np(pthread_self(), "weft-progress");
        std::uint64_t seen = activity.count();
        while (!stop.stop_requested()) {
            std::this_thread::sleep_for(interval);
            const std::uint64_t now = activity.count();
            if (now != seen) { // the owner is polling: progress happens there
                seen = now;
                continue;
            }
            cq_->progress();
            drives_.store(drives_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
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

ProgressThread::~ProgressThread()
{
    thread_.request_stop();
    if (thread_.joinable())
        thread_.join();
}

} // namespace weft
