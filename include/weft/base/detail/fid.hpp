// SPDX-License-Identifier: MIT
/// @brief Ownership of raw libfabric handles (weft's own: not part of its API).
///
/// Every fid_* struct begins with `struct fid`, so one deleter calling fi_close
/// serves all of them; fi_info lists have their own (fi_freeinfo). A failed close is logged, never thrown. weft counts the
/// fids it holds, so tests can prove that nothing is left open.
#pragma once

#include <cstddef>
#include <memory>

#include <rdma/fabric.h>

namespace weft::detail {

/// Closes a fid; on failure logs the class and the error (destructors never throw).
void close_fid(fid_t fid) noexcept;
void count_opened_fid() noexcept;

/// Fids weft has opened and not yet closed, in this process.
std::size_t live_fids() noexcept;

struct FidCloser {
    template <class T>
    void operator()(T* p) const noexcept
    {
        if (p)
            close_fid(&p->fid);
    }
};

/// An fi_info list (fi_getinfo's answer, fi_dupinfo's copy), freed whole.
struct InfoDeleter {
    void operator()(fi_info* i) const noexcept { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// unique_ptr semantics over a libfabric handle, counted.
template <class T>
class FidPtr {
public:
    FidPtr() noexcept = default;
    explicit FidPtr(T* raw) noexcept : p_(raw)
    {
        if (raw)
            count_opened_fid();
    }
    void reset(T* raw = nullptr) noexcept
    {
        p_.reset(raw);
        if (raw)
            count_opened_fid();
    }
    /// Gives the handle up without closing it (it stays counted as open).
    T* release() noexcept { return p_.release(); }
    T* get() const noexcept { return p_.get(); }
    T* operator->() const noexcept { return p_.get(); }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    std::unique_ptr<T, FidCloser> p_;
};

} // namespace weft::detail
