// SPDX-License-Identifier: MIT
// weft-raw-bench's data path: each pattern over fi_write, fi_read,
// fi_writedata and fi_writemsg, completions reaped from one CQ.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "raw_end.hpp"

namespace weft::bench::raw {
namespace {

using namespace std::chrono;

std::uint64_t tail_stamp(const std::byte* region, std::size_t size)
{
    std::atomic_thread_fence(std::memory_order_acquire);
    std::uint64_t v = 0;
    std::memcpy(&v, size >= 8 ? region + size - 8 : region, std::min<std::size_t>(size, 8));
    return v;
}

std::uint64_t masked(std::uint64_t stamp, std::size_t size)
{
    return size >= 8 ? stamp : stamp & ((std::uint64_t{1} << (8 * size)) - 1);
}

} // namespace

double RawEnd::round(const Plan& plan)
{
    send_plan(side_, plan, Deadline::after(cfg_.timeout));
    prepare(plan);
    const auto start = steady_clock::now();
    switch (plan.pattern) {
    case Pattern::lat_write: lat_write(plan); break;
    case Pattern::lat_read: lat_read(plan); break;
    case Pattern::lat_notify: lat_notify(plan); break;
    case Pattern::rate: rate(plan); break;
    case Pattern::cpu_write: cpu_write(plan); break;
    default: windowed(plan); break;
    }
    if (plan.pattern == Pattern::bw_notify)
        barrier();
    const double seconds = duration<double>(steady_clock::now() - start).count();
    if (plan.pattern != Pattern::bw_notify)
        barrier();
    return seconds;
}

void RawEnd::serve(const Plan& plan)
{
    prepare(plan);
    const std::size_t size = plan.size;
    if (plan.pattern == Pattern::lat_write) {
        for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
            while (tail_stamp(mine_, size) != masked(i, size))
                reap();
            std::memcpy(size >= 8 ? src_ + size - 8 : src_, &i, std::min<std::size_t>(size, 8));
            write(src_, size, 0); // from its own buffer, as WeftEnd::serve
        }
    } else if (plan.pattern == Pattern::lat_notify) {
        for (std::uint64_t i = 0; i < plan.iterations; ++i) {
            wait_remote_data();
            expected_ = 0;
            writedata(mine_, size);
            if (expected_)
                wait_own(expected_);
        }
    } else if (plan.pattern == Pattern::bw_notify) {
        for (std::uint64_t i = 0; i < plan.iterations; ++i)
            wait_remote_data();
    }
    while (!side_.readable())
        reap();
    barrier();
}

/// Reads completions: counts our own finished operations into own_ and
/// the peer's notifications into remote_data_; reposts consumed receives.
void RawEnd::reap()
{
    std::array<fi_cq_data_entry, 16> e;
    const ssize_t n = fi_cq_read(cq_, e.data(), e.size());
    if (n == -FI_EAGAIN)
        return;
    if (n < 0) {
        fi_cq_err_entry err{};
        fi_cq_readerr(cq_, &err, 0);
        throw std::runtime_error(fmt::format("completion error: {}", fi_strerror(err.err)));
    }
    for (ssize_t i = 0; i < n; ++i) {
        // A peer's notification has no context of ours (an initiator's own
        // writedata completion may carry FI_REMOTE_CQ_DATA too).
        const bool own_context = e[static_cast<std::size_t>(i)].op_context == &ctx_;
        if ((e[static_cast<std::size_t>(i)].flags & FI_REMOTE_CQ_DATA) && !own_context) {
            ++remote_data_;
            repost(e[static_cast<std::size_t>(i)].op_context);
        } else if (own_context) {
            ++own_;
        } else {
            repost(e[static_cast<std::size_t>(i)].op_context);
        }
    }
}

void RawEnd::repost(void* ctx)
{
    for (int i = 0; i < 16; ++i)
        if (ctx == &recv_ctx_[i])
            ck(fi_recv(ep_, recv_buf_ + 256 * i, 256, recv_desc_, FI_ADDR_UNSPEC, &recv_ctx_[i]), "fi_recv");
}

// Every wait has a deadline, checked now and then.
void RawEnd::check_deadline(std::uint32_t& spins, const Deadline& deadline) const
{
    if ((++spins & 1023u) == 0 && deadline.expired())
        throw std::runtime_error("no completion before the deadline: is the peer alive?");
}

void RawEnd::wait_own(std::size_t n)
{
    const auto deadline = Deadline::after(cfg_.timeout);
    std::uint32_t spins = 0;
    while (own_ < n) {
        reap();
        check_deadline(spins, deadline);
    }
    own_ -= n;
}

void RawEnd::wait_remote_data()
{
    const auto deadline = Deadline::after(cfg_.timeout);
    std::uint32_t spins = 0;
    while (remote_data_ == 0) {
        reap();
        check_deadline(spins, deadline);
    }
    --remote_data_;
}

void RawEnd::write(std::byte* from, std::size_t size, std::uint64_t offset)
{
    if (size <= inject_)
        post([&] { return fi_inject_write(ep_, from, size, peer_, peer_addr_ + offset, peer_key_); });
    else
        post([&] { return fi_write(ep_, from, size, from == mine_ ? mine_desc_ : src_desc_, peer_, peer_addr_ + offset, peer_key_, &ctx_); });
}

void RawEnd::writedata(std::byte* from, std::size_t size)
{
    if (size <= inject_)
        post([&] { return fi_inject_writedata(ep_, from, size, 0, peer_, peer_addr_, peer_key_); });
    else {
        post([&] { return fi_writedata(ep_, from, size, from == mine_ ? mine_desc_ : src_desc_, 0, peer_, peer_addr_, peer_key_, &ctx_); });
        ++expected_;
    }
}

void RawEnd::lat_write(const Plan& plan)
{
    const std::size_t size = plan.size;
    for (std::uint64_t i = 1; i <= plan.iterations; ++i) {
        std::memcpy(size >= 8 ? src_ + size - 8 : src_, &i, std::min<std::size_t>(size, 8));
        write(src_, size, 0);
        while (tail_stamp(mine_, size) != masked(i, size))
            reap();
    }
}

void RawEnd::lat_read(const Plan& plan)
{
    for (std::uint64_t i = 0; i < plan.iterations; ++i) {
        post([&] { return fi_read(ep_, src_, plan.size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
        wait_own(1);
    }
}

void RawEnd::lat_notify(const Plan& plan)
{
    for (std::uint64_t i = 0; i < plan.iterations; ++i) {
        expected_ = 0;
        writedata(src_, plan.size);
        wait_remote_data();
        if (expected_)
            wait_own(expected_);
    }
}

void RawEnd::windowed(const Plan& plan)
{
    const std::size_t size = plan.size;
    const std::uint64_t depth = std::max<std::uint64_t>(1, plan.queue_depth);
    const std::uint64_t blocks = iops_region / size;
    std::uint64_t posted = 0, x = 0x9E3779B97F4A7C15ull;
    own_ = 0;
    while (own_ < plan.iterations) {
        while (posted < plan.iterations && posted - own_ < depth) {
            switch (plan.pattern) {
            case Pattern::bw_write:
                post([&] { return fi_write(ep_, src_, size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
                break;
            case Pattern::bw_read:
                post([&] { return fi_read(ep_, src_, size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
                break;
            case Pattern::bw_notify:
                post([&] { return fi_writedata(ep_, src_, size, src_desc_, 0, peer_, peer_addr_, peer_key_, &ctx_); });
                break;
            default: {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                const std::uint64_t off = (x % blocks) * size;
                post([&] { return fi_read(ep_, src_ + off, size, src_desc_, peer_, peer_addr_ + off, peer_key_, &ctx_); });
            }
            }
            ++posted;
        }
        reap();
    }
    own_ = 0;
}

void RawEnd::rate(const Plan& plan)
{
    constexpr std::size_t batch = 16;
    const std::uint64_t window = std::max<std::uint64_t>(1, plan.queue_depth / batch);
    std::uint64_t posted = 0, signaled = 0;
    own_ = 0;
    while (own_ < signaled || posted < plan.iterations) {
        while (posted < plan.iterations && signaled - own_ < window) {
            for (std::size_t k = 0; k < batch; ++k) {
                const bool last = k + 1 == batch;
                iovec iov{src_ + k * plan.size, plan.size};
                void* desc = src_desc_;
                fi_rma_iov rma{peer_addr_ + k * plan.size, plan.size, peer_key_};
                // tcp completes unsignaled writes anyway: give them no context of ours.
                fi_msg_rma msg{&iov, &desc, 1, peer_, &rma, 1, last ? &ctx_ : nullptr, 0};
                const std::uint64_t flags = last ? FI_COMPLETION : (FI_MORE | (plan.size <= inject_ ? FI_INJECT : 0));
                post([&] { return fi_writemsg(ep_, &msg, flags); });
            }
            ++signaled;
            posted += batch;
        }
        reap();
    }
    own_ = 0;
}

void RawEnd::cpu_write(const Plan& plan)
{
    for (std::uint64_t i = 0; i < plan.iterations; ++i) {
        if (plan.size <= inject_) {
            post([&] { return fi_inject_write(ep_, src_, plan.size, peer_, peer_addr_, peer_key_); });
        } else {
            post([&] { return fi_write(ep_, src_, plan.size, src_desc_, peer_, peer_addr_, peer_key_, &ctx_); });
            wait_own(1);
        }
    }
}

} // namespace weft::bench::raw
