// SPDX-License-Identifier: MIT
// weft::provider_checks: each provider's own checks, in the table's order.
#include <fstream>

#include "checks.hpp"
#include "traits.hpp"

namespace weft {

std::string_view to_string(Verdict v) noexcept
{
    switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::note: return "note";
    case Verdict::warn: return "warn";
    case Verdict::fail: return "FAIL";
    }
    return "?";
}

std::vector<Finding> provider_checks(const CheckOptions& options)
{
    std::vector<Finding> out;
    for (const providers::Traits* t : providers::all())
        if (t->checks)
            t->checks(options, out);
    return out;
}

namespace providers {

std::string read_first_line(const char* path)
{
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
}

} // namespace providers
} // namespace weft
