// SPDX-License-Identifier: MIT
/// @brief A provider's progress lock, as weft watches it (providers/ finds it,
/// CompletionQueue::guard keeps reads out while a dead process holds it).
#pragma once

#include <memory>

namespace weft {
namespace detail {

/// A word the provider's progress takes as a spin lock, mapped where weft
/// can read it (providers/: shm's region lock in libfabric 1.17). A process
/// killed while holding it holds it for good, and every later progress call
/// would spin on it forever.
struct ProgressLock {
    const volatile int* word = nullptr;
    int unlocked = 0;              ///< the word's value when free
    std::shared_ptr<const void> keep; ///< the mapping it lives in
    bool held() const noexcept { return *word != unlocked; }
};

} // namespace detail
} // namespace weft
