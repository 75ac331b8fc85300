// SPDX-License-Identifier: MIT
/// @brief Ownership of raw libfabric handles.
///
/// Every fid_* struct begins with `struct fid`, so one deleter calling fi_close
/// serves all of them. A failed close is logged, never thrown.
#pragma once

#include <memory>

#include <rdma/fabric.h>

namespace weft::detail {

/// Closes a fid; on failure logs the class and the error (destructors never throw).
void close_fid(fid_t fid) noexcept;

struct FidCloser {
    template <class T>
    void operator()(T* p) const noexcept
    {
        if (p)
            close_fid(&p->fid);
    }
};

template <class T>
using FidPtr = std::unique_ptr<T, FidCloser>;

} // namespace weft::detail
