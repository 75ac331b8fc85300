// SPDX-License-Identifier: MIT
#include "weft/base/deadline.hpp"

#include <limits>

namespace weft {

int Deadline::remaining_ms() const noexcept
{
    using namespace std::chrono;
    const auto left = remaining();
    if (left == Clock::duration::zero())
        return 0;
    const auto ms = duration_cast<milliseconds>(left + milliseconds(1) - nanoseconds(1)).count();
    return ms > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                                : static_cast<int>(ms);
}

} // namespace weft
