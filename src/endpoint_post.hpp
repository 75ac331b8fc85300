// SPDX-License-Identifier: MIT
// The one post helper: the fast path is a single call and a compare; anything
// else (back-pressure, errors) goes out of line to Endpoint::post_slow.
#pragma once

#include <type_traits>

#include "weft/endpoint.hpp"

namespace weft {

template <class F>
void Endpoint::post(const char* call, F&& f)
{
    if (ep_ == nullptr) [[unlikely]]
        closed_error(call);
    const ssize_t r = f();
    if (r == 0) [[likely]]
        return;
    using Fn = std::remove_reference_t<F>;
    post_slow(call, r, [](void* p) -> ssize_t { return (*static_cast<Fn*>(p))(); }, &f);
}

} // namespace weft
