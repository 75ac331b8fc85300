// SPDX-License-Identifier: MIT
#include "weft/fabric/completion_queue.hpp"
#include "check.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>

#include <fmt/format.h>

#include "weft/base/error.hpp"

namespace weft {
namespace {

std::string_view describe(std::uint64_t flags)
{
    if (flags & FI_ATOMIC)
        return "atomic";
    if ((flags & FI_RMA) && (flags & FI_READ))
        return "RMA read";
    if ((flags & FI_RMA) && (flags & FI_WRITE))
        return "RMA write";
    if (flags & FI_RECV)
        return "receive";
    if (flags & FI_SEND)
        return "send";
    return "operation";
}

} // namespace

struct CompletionQueue::Private {};

CompletionQueue::CompletionQueue(Private, std::shared_ptr<Domain> domain,
                                 detail::FidPtr<fid_cq> fid, std::size_t size)
    : domain_(std::move(domain)), fid_(std::move(fid)), size_(size)
{
}

std::shared_ptr<CompletionQueue> CompletionQueue::open(std::shared_ptr<Domain> domain,
                                                       std::size_t size, bool sleepable,
                                                       bool naps)
{
    fi_cq_attr attr{};
    attr.size = size;
    attr.format = FI_CQ_FORMAT_DATA;
    attr.wait_obj = sleepable ? FI_WAIT_FD : FI_WAIT_NONE;
    fid_cq* raw = nullptr;
    int ret = fi_cq_open(domain->get(), &attr, &raw, nullptr);
    if (ret != 0 && sleepable && naps) {
        attr.wait_obj = FI_WAIT_NONE; // no descriptor: sleeps elsewhere are naps
        ret = fi_cq_open(domain->get(), &attr, &raw, nullptr);
        if (ret == 0) {
            detail::check(ret, "fi_cq_open", domain->provider());
            auto cq = std::make_shared<CompletionQueue>(Private{}, std::move(domain),
                                                        detail::FidPtr<fid_cq>(raw), size);
            cq->naps_ = true;
            cq->sleep_cap_ = 10;
            return cq;
        }
    }
    if (ret != 0 && sleepable)
        throw UsageError("fi_cq_open", ret, std::string(domain->provider()),
                         fmt::format("{} offers no file descriptor to sleep on (FI_WAIT_FD): "
                                     "use Waiting::adaptive (the default) with it",
                                     domain->provider()));
    detail::check(ret, "fi_cq_open", domain->provider(),
                  size ? fmt::format("asked for {} entries", size) : std::string{});
    auto cq = std::make_shared<CompletionQueue>(Private{}, std::move(domain),
                                                detail::FidPtr<fid_cq>(raw), size);
    if (sleepable && fi_control(&raw->fid, FI_GETWAIT, &cq->fd_) != 0)
        throw UsageError("fi_control(FI_GETWAIT)", -FI_ENOSYS, std::string(cq->domain_->provider()),
                         fmt::format("{} gives no file descriptor to sleep on: use "
                                     "Waiting::adaptive (the default) with it",
                                     cq->domain_->provider()));
    return cq;
}

bool CompletionQueue::trywait() noexcept
{
    if (naps_)
        return true; // nothing to arm: a nap is short, and the queue is read after it
    fid_t fids[] = {&fid_->fid};
    return fd_ >= 0 && fi_trywait(domain_->fabric()->get(), fids, 1) == 0;
}

void CompletionQueue::empty_out() noexcept
{
    // A read that returns nothing may still have handled up to 32 of the
    // layer's own entries (ofi_rxm's credits and acknowledgements): the queue
    // counts as empty after several quiet reads in a row.
    constexpr int quiet_reads = 16;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    std::array<fi_cq_data_entry, 32> entries;
    for (int quiet = 0; quiet < quiet_reads && std::chrono::steady_clock::now() < until;) {
        const ssize_t r = fi_cq_read(fid_.get(), entries.data(), entries.size());
        if (r == -FI_EAGAIN) {
            ++quiet;
            continue;
        }
        if (r == -FI_EAVAIL) {
            fi_cq_err_entry err{};
            (void)fi_cq_readerr(fid_.get(), &err, 0);
        } else if (r < 0) {
            return; // the queue itself failed: nothing more to read
        }
        quiet = 0;
    }
}

bool CompletionQueue::sleep(int ms) noexcept
{
    if (fd_ < 0)
        return false;
    pollfd p{fd_, POLLIN, 0};
    (void)::poll(&p, 1, std::min(ms, sleep_cap_));
    return true;
}

void CompletionQueue::raise(ssize_t r)
{
    const auto prov = domain_->provider();
    if (r != -FI_EAVAIL)
        detail::throw_error("fi_cq_read", static_cast<int>(r), prov);
    fi_cq_err_entry err{};
    const ssize_t er = fi_cq_readerr(fid_.get(), &err, 0);
    if (er < 0)
        detail::throw_error("fi_cq_readerr", static_cast<int>(er), prov);
    std::array<char, 256> buf{};
    const char* text = fi_cq_strerror(fid_.get(), err.prov_errno, err.err_data, buf.data(),
                                      buf.size());
    // Negative, whatever sign the provider stored (shm stores -EIO).
    const int code = err.err > 0 ? -err.err : err.err < 0 ? err.err : -FI_EOTHER;
    std::string hint = fmt::format("provider says \"{}\" (prov_errno {})", text ? text : "",
                                   err.prov_errno);
    if (code == -FI_EACCES || code == -FI_EINVAL || code == -FI_EKEYREJECTED)
        hint += "; the target rejected the access: check the RemoteRegion (key, bounds, and "
                "whether the region grants this access)";
    auto message = detail::format_failure(describe(err.flags), code, prov, hint);
    if (code == -FI_ETIMEDOUT)
        throw TimeoutError("fi_cq_read", code, std::string(prov), message, err.op_context);
    throw Error("fi_cq_read", code, std::string(prov), message, err.op_context);
}

} // namespace weft

namespace weft {

bool CompletionQueue::guarded() noexcept
{
    // Entered only while the lock is free. libfabric 1.17's shm then takes it
    // three times in one progress call (responses, commands, SAR list): a peer
    // that takes it in between and is killed inside still traps the caller
    // (the residual that QUIRKS.md counts).
    // The progress thread and the reader both come here: the time is an atomic.
    if (!lock_->held()) {
        if (locked_since_.load(std::memory_order_relaxed) != 0)
            locked_since_.store(0, std::memory_order_relaxed);
        return true;
    }
    const Clock::time_point now = Clock::now();
    Clock::rep since = locked_since_.load(std::memory_order_relaxed);
    if (since == 0) {
        since = now.time_since_epoch().count();
        locked_since_.store(since, std::memory_order_relaxed);
    }
    // A live holder lets go within microseconds, or within its time slice
    // when it was preempted holding it: wait that long (the queue may hold
    // entries already, which a poll must not miss), unless the lock has been
    // held so long that its holder is most likely dead.
    if (now - Clock::time_point(Clock::duration(since)) < held_by_the_dead)
        for (const auto until = now + live_holder_grace; Clock::now() < until;) {
            if (!lock_->held()) {
                locked_since_.store(0, std::memory_order_relaxed);
                return true;
            }
            sched_yield();
        }
    return false;
}

Clock::duration CompletionQueue::locked_for() const noexcept
{
    const Clock::rep since = locked_since_.load(std::memory_order_relaxed);
    return since == 0 ? Clock::duration::zero()
                      : Clock::now() - Clock::time_point(Clock::duration(since));
}

} // namespace weft
