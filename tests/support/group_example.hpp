// SPDX-License-Identifier: MIT
// What the group example (examples/, weft-group-ring) prints when its ranks
// are done, checked: the same whoever launched them.
#pragma once

#include <cstdint>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "support/process.hpp"

namespace weft::test {

/// Whether `output` has rank `r` of `n` saying it verified ring and mesh.
inline bool ring_and_mesh_verified(const std::string& output, std::uint32_t r, std::uint32_t n)
{
    return output.find(fmt::format("rank {} of {}: ring and mesh verified", r, n)) !=
           std::string::npos;
}

/// A PMIx launcher's run of the example's 8 ranks (`launcher`: mpirun, srun):
/// it ended well, every rank verified ring and mesh, and they knew their launcher.
inline void check_launched_example(const Ran& job, const std::string& launcher)
{
    INFO(launcher << " printed:\n" << job.output);
    CHECK(job.status == 0);
    for (std::uint32_t r = 0; r < 8; ++r)
        CHECK(ring_and_mesh_verified(job.output, r, 8));
    CHECK(job.output.find("launched by a PMIx launcher") != std::string::npos);
}

} // namespace weft::test
