// SPDX-License-Identifier: MIT
// Every memfd MemoryRegion::allocate() made for sharing on this host, by its
// address: register_memory() of its bytes on another domain (another Node)
// offers the same memfd to co-located peers, one allocation for all of them.
#pragma once

#include <memory>
#include <span>

#include "weft/fabric/memory_region.hpp"

namespace weft::lane {
class Segment;
}

namespace weft::detail {

void remember_shared_allocation(const std::shared_ptr<lane::Segment>& segment);
/// The live segment holding all of `memory` whose seal lets peers have
/// `access`, or none.
std::shared_ptr<lane::Segment> shared_allocation_holding(std::span<std::byte> memory,
                                                         Access access);

} // namespace weft::detail
