// SPDX-License-Identifier: MIT
// The group example launched by Slurm: srun --mpi=pmix -n 8 on a one-node
// cluster that the test starts itself (support/slurm.hpp), which checks the
// PMIx store under Slurm's PMIx server as ranks_as_processes.cpp does under mpirun's.
#include <catch2/catch.hpp>

#include "support/group_example.hpp"
#include "support/skip.hpp"
#include "support/slurm.hpp"

using namespace std::chrono_literals;
using weft::test::Slurm;

TEST_CASE("group: srun --mpi=pmix -n 8 of the group example on a slurm the test starts: the "
          "PMIx store, ring and mesh",
          "[group][process][pmix][slurm]")
{
    WEFT_SKIP_IF(Slurm::unavailable());
    // 8 tasks on a node of one CPU: --overcommit.
    const auto job = Slurm::shared().run(
        {"srun", "--mpi=pmix", "--overcommit", "-n", "8", WEFT_GROUP_EXAMPLE_PATH}, 120s, "srun");
    weft::test::check_launched_example(job, "srun");
}
