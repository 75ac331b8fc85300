// SPDX-License-Identifier: MIT
/// @brief Deadlines: every blocking call in weft takes one.
///
///     c.wait(&ctx, weft::Deadline::after(5s));   // TimeoutError after 5 s
///
/// A Deadline is a point on the steady clock (or never()); waits poll or sleep
/// until it and then throw TimeoutError naming what was waited for.
#pragma once

#include <chrono>
#include <cstdint>

namespace weft {

using Clock = std::chrono::steady_clock;

/// Default for blocking calls whose caller gave no deadline.
inline constexpr std::chrono::seconds default_timeout{30};

/// A point in time after which a wait gives up with TimeoutError.
/// Cheap to copy; `after()` reads the clock once.
class Deadline {
public:
    constexpr explicit Deadline(Clock::time_point when) noexcept : when_(when) {}

    /// Now plus `d`; a duration too long to add (Clock::duration::max())
    /// saturates to never().
    static Deadline after(Clock::duration d) noexcept
    {
        const auto now = Clock::now();
        return Deadline(d >= Clock::time_point::max() - now ? Clock::time_point::max() : now + d);
    }
    /// A deadline that never passes.
    static constexpr Deadline never() noexcept { return Deadline(Clock::time_point::max()); }

    bool expired() const noexcept { return Clock::now() >= when_; }
    Clock::time_point when() const noexcept { return when_; }

    /// Remaining time, never negative.
    Clock::duration remaining() const noexcept
    {
        auto left = when_ - Clock::now();
        return left.count() > 0 ? left : Clock::duration::zero();
    }
    /// Remaining whole milliseconds, rounded up so that a short wait is not 0.
    int remaining_ms() const noexcept;

private:
    Clock::time_point when_;
};

} // namespace weft
