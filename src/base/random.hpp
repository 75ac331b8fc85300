// SPDX-License-Identifier: MIT
// weft's one source of random bytes (the kernel's getrandom): memory keys,
// Node instances, tokens and the shared-secret check's nonces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace weft::detail {

/// Fills `out`; throws weft::Error saying what the bytes were `for_what`.
void random_bytes(std::span<std::byte> out, std::string_view for_what);

inline std::uint64_t random_u64(std::string_view for_what)
{
    std::uint64_t v = 0;
    random_bytes(std::as_writable_bytes(std::span(&v, 1)), for_what);
    return v;
}

} // namespace weft::detail
