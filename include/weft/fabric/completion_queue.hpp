// SPDX-License-Identifier: MIT
/// @brief The completion queue (fi_cq): where posted operations report back.
/// Raw entries and errors, read by Completions (completions.hpp), which is what
/// endpoints and users poll; open one directly only to work below weft's data path.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "weft/base/deadline.hpp"
#include "weft/fabric/domain.hpp"
#include "weft/base/detail/fid.hpp"
#include "weft/base/detail/progress_lock.hpp"

namespace weft {

/// Owns a fid_cq (FI_CQ_FORMAT_DATA); keeps its Domain alive. One reader thread
/// at a time; progress() may run on a weft progress thread when the domain is
/// FI_THREAD_SAFE.
class CompletionQueue {
public:
    /// `size` 0 = provider default. `sleepable`: with a file descriptor to
    /// sleep on (FI_WAIT_FD); UsageError naming the provider when it has none,
    /// unless `naps`: then without one, and its sleeps are naps of 10 ms (a
    /// Node whose same-host lane wakes it: the queue is looked at between).
    static std::shared_ptr<CompletionQueue> open(std::shared_ptr<Domain> domain, std::size_t size,
                                                 bool sleepable = false, bool naps = false);

    /// Reads up to `n` entries; returns 0 when none is ready. An error entry throws
    /// weft::Error carrying the failed operation's context, the errno and the
    /// provider's fi_cq_strerror text.
    std::size_t read(fi_cq_data_entry* out, std::size_t n)
    {
        if (!enter()) [[unlikely]]
            return 0;
        const ssize_t r = fi_cq_read(fid_.get(), out, n);
        if (r > 0) [[likely]]
            return static_cast<std::size_t>(r);
        if (r == -FI_EAGAIN)
            return 0;
        raise(r);
    }

    /// read() that also gives each entry's source address (FI_SOURCE):
    /// FI_ADDR_NOTAVAIL when the provider does not know it.
    std::size_t read_from(fi_cq_data_entry* out, fi_addr_t* from, std::size_t n)
    {
        if (!enter()) [[unlikely]]
            return 0;
        const ssize_t r = fi_cq_readfrom(fid_.get(), out, n, from);
        if (r > 0) [[likely]]
            return static_cast<std::size_t>(r);
        if (r == -FI_EAGAIN)
            return 0;
        raise(r);
    }

    /// Drives the provider's progress without taking completions out of the
    /// queue (fi_cq_read with a count of 0). Needed when data progress is MANUAL.
    void progress() noexcept
    {
        if (enter()) [[likely]]
            (void)fi_cq_read(fid_.get(), nullptr, 0);
    }

    /// Reads and progress stay out of the provider while `lock` is held (a
    /// live holder lets go within microseconds; one killed while holding it,
    /// never): the queue reads as empty meanwhile, so a wait ends at its
    /// deadline, or with its peer's loss, instead of spinning in the provider
    /// for good. One lock per queue (shm: the endpoint's own region).
    void guard(std::shared_ptr<const detail::ProgressLock> lock) noexcept { lock_ = std::move(lock); }
    /// How long the guard's lock has been seen held, without a pause, by
    /// the reads since (zero when it was free at the last read).
    Clock::duration locked_for() const noexcept;
    /// How long a poll waits for a live holder to let the guard's lock go,
    /// and how long held before its holder is taken for dead (then polls
    /// return at once, empty).
    static constexpr auto live_holder_grace = std::chrono::milliseconds(5);
    static constexpr auto held_by_the_dead = std::chrono::milliseconds(100);

    /// Reads the queue until it stays empty (at most 100 ms), dropping every
    /// entry and error entry: for the last endpoint bound to it, just before
    /// that endpoint closes. ofi_rxm (libfabric 1.17) handles the messages its
    /// connections received but nobody read *after* closing each connection,
    /// and reposts their receive buffers on the endpoint it has just freed
    /// (`rxm_close_conn`: fi_close, then `rxm_flush_msg_cq`): a crash in
    /// fi_close on siw (libfabric#11828; fixed upstream after
    /// 1.17 by flushing first). Test: "node: a Node closed with messages it
    /// never read closes cleanly".
    void empty_out() noexcept;

    /// The descriptor that turns readable when something arrives (-1 unless
    /// opened sleepable). Sleep on it only after trywait() said so.
    int fd() const noexcept { return fd_; }
    /// True when nothing is pending and the caller may sleep on fd()
    /// (fi_trywait; it also re-arms the descriptor).
    bool trywait() noexcept;
    /// Sleeps until something arrives or `ms` pass (at most the cap); false
    /// without a descriptor.
    bool sleep(int ms) noexcept;
    /// Sleeps last at most `ms` (Quirks::wait_fd_misses_data).
    void cap_sleep(int ms) noexcept { sleep_cap_ = ms; }
    bool sleep_capped() const noexcept { return sleep_cap_ < (1 << 30); }
    /// Opened sleepable without a descriptor (`naps`): sleep elsewhere, 10 ms at most.
    bool naps() const noexcept { return naps_; }
    /// Makes fd() readable (fi_cq_signal): a progress thread that moved data
    /// into the queue wakes an owner asleep on the same wait object, whose
    /// signal the provider's progress resets (tcp in libfabric 1.17).
    void signal() noexcept { (void)fi_cq_signal(fid_.get()); }

    fid_cq* get() const noexcept { return fid_.get(); }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    std::size_t size() const noexcept { return size_; }

    struct Private;
    CompletionQueue(Private, std::shared_ptr<Domain> domain, detail::FidPtr<fid_cq> fid,
                    std::size_t size);

private:
    [[noreturn]] void raise(ssize_t r);
    /// False while the guard's lock is held: stay out of the provider.
    bool enter() noexcept
    {
        if (!lock_) [[likely]]
            return true;
        return guarded();
    }
    bool guarded() noexcept;

    std::shared_ptr<Domain> domain_;
    detail::FidPtr<fid_cq> fid_;
    std::size_t size_;
    int fd_ = -1;
    int sleep_cap_ = 1 << 30;
    bool naps_ = false;
    std::shared_ptr<const detail::ProgressLock> lock_;
    std::atomic<Clock::rep> locked_since_{0}; // the lock seen held since (0: free)
};

} // namespace weft
