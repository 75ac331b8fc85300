// SPDX-License-Identifier: MIT
// Members as threads: runs a body on n threads and rethrows the first failure.
#pragma once

#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace weft::test {

/// Runs `body(i)` for i in [0, n) on n threads; rethrows the first failure.
template <class F>
void on_threads(std::size_t n, F body)
{
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
            try {
                body(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    for (auto& t : threads)
        t.join();
    for (auto& e : errors)
        if (e)
            std::rethrow_exception(e);
}

} // namespace weft::test
