// SPDX-License-Identifier: MIT
/// @brief The completion queue (fi_cq): where posted operations report back.
#pragma once

#include <cstddef>
#include <memory>

#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "weft/domain.hpp"
#include "weft/fid.hpp"

namespace weft {

/// Owns a fid_cq (FI_CQ_FORMAT_DATA); keeps its Domain alive. One reader thread
/// at a time; progress() may run on a weft progress thread when the domain is
/// FI_THREAD_SAFE.
class CompletionQueue {
public:
    /// `size` 0 = provider default.
    static std::shared_ptr<CompletionQueue> open(std::shared_ptr<Domain> domain, std::size_t size);

    /// Reads up to `n` entries; returns 0 when none is ready. An error entry throws
    /// weft::Error carrying the failed operation's context, the errno and the
    /// provider's fi_cq_strerror text.
    std::size_t read(fi_cq_data_entry* out, std::size_t n)
    {
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
        const ssize_t r = fi_cq_readfrom(fid_.get(), out, n, from);
        if (r > 0) [[likely]]
            return static_cast<std::size_t>(r);
        if (r == -FI_EAGAIN)
            return 0;
        raise(r);
    }

    /// Drives the provider's progress without taking completions out of the
    /// queue (fi_cq_read with a count of 0). Needed when data progress is MANUAL.
    void progress() noexcept { (void)fi_cq_read(fid_.get(), nullptr, 0); }

    fid_cq* get() const noexcept { return fid_.get(); }
    const std::shared_ptr<Domain>& domain() const noexcept { return domain_; }
    std::size_t size() const noexcept { return size_; }

    struct Private;
    CompletionQueue(Private, std::shared_ptr<Domain> domain, detail::FidPtr<fid_cq> fid,
                    std::size_t size);

private:
    [[noreturn]] void raise(ssize_t r);

    std::shared_ptr<Domain> domain_;
    detail::FidPtr<fid_cq> fid_;
    std::size_t size_;
};

} // namespace weft
