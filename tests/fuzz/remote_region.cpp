// SPDX-License-Identifier: MIT
// Fuzzes RemoteRegion::decode: any bytes from a peer either decode to a region
// that re-encodes to the same bytes, or are refused with weft::UsageError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "weft/base/error.hpp"
#include "weft/fabric/remote_region.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto bytes = std::as_bytes(std::span(data, size));
    try {
        const weft::RemoteRegion r = weft::RemoteRegion::decode(bytes);
        // Accepted: canonical (re-encodes to the same bytes), and the bounds
        // checks hold for the extremes of its length.
        const auto again = r.encode();
        if (size != again.size() || std::memcmp(again.data(), data, size) != 0)
            std::abort();
        if (r.length() == 0 || r.base() + r.length() < r.base())
            std::abort(); // empty, or wrapping around the address space
        try {
            (void)r.read_address(r.length(), 1);
            std::abort(); // one byte past the end was accepted
        } catch (const weft::UsageError&) {
        }
        try {
            (void)r.write_address(~std::uint64_t{0}, 2);
            std::abort(); // offset + length overflowed into range
        } catch (const weft::UsageError&) {
        }
    } catch (const weft::UsageError&) {
        // refused, with a reason: fine
    }
    return 0;
}
