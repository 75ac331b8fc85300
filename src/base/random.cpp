// SPDX-License-Identifier: MIT
#include "random.hpp"
#include "check.hpp"

#include <sys/random.h>

#include <cerrno>
#include <string>

#include "weft/base/error.hpp"

namespace weft::detail {

void random_bytes(std::span<std::byte> out, std::string_view for_what)
{
    std::size_t got = 0;
    while (got < out.size()) {
        const ssize_t n = getrandom(out.data() + got, out.size() - got, 0);
        if (n > 0)
            got += static_cast<std::size_t>(n);
        else if (errno != EINTR)
            throw_error("getrandom", -errno, "", "no entropy for " + std::string(for_what));
    }
}

} // namespace weft::detail
