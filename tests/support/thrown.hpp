// SPDX-License-Identifier: MIT
// The message of the exception a call throws, for CHECK_THAT(..., Contains(...)).
#pragma once

#include <exception>
#include <string>

namespace weft::test {

/// The message of the `E` that `f` throws, or what went otherwise.
template <class E, class F>
std::string thrown(F&& f)
{
    try {
        f();
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("another exception: ") + e.what();
    }
    return "nothing thrown";
}

} // namespace weft::test
