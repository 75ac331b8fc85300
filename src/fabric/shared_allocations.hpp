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
/// The live, sealed segment that is all of `memory` (one allocation, whole)
/// and whose seal gives peers exactly `access`, or none.
std::shared_ptr<lane::Segment> shared_allocation_holding(std::span<std::byte> memory,
                                                         Access access);

} // namespace weft::detail
