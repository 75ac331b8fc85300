// SPDX-License-Identifier: MIT
// Fuzzes NodeAddress::decode, which reads what a peer (or a store) hands over:
// every input must decode, or be refused with UsageError; a decoded address
// must encode back to the same bytes.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "weft/base/error.hpp"
#include "weft/peers/node_address.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto bytes = std::as_bytes(std::span(data, size));
    try {
        const weft::NodeAddress a = weft::NodeAddress::decode(bytes);
        const auto again = a.encode();
        if (again.size() != size || !std::equal(again.begin(), again.end(), bytes.begin()))
            std::abort(); // decode accepted bytes that do not encode back
    } catch (const weft::UsageError&) {
    }
    return 0;
}
