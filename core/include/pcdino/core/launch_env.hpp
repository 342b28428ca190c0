// Who launched this process and where it sits in the job: read from the launcher's environment, so that a
// rank knows its place (and its GPU) before MPI or NCCL is set up.
#pragma once

#include <functional>
#include <string>

namespace pcdino {

struct LaunchEnv {
  std::string launcher = "none";  ///< "openmpi", "slurm", "torchrun" or "none" (a single process)
  int rank = 0;                   ///< world rank
  int size = 1;                   ///< world size
  int local_rank = 0;             ///< rank on this node: selects the GPU
  int local_size = 1;             ///< ranks on this node
  std::string master_addr;        ///< torchrun's MASTER_ADDR ("" otherwise)
  int master_port = 0;            ///< torchrun's MASTER_PORT (0 otherwise)
};

/// Reads, in this order of precedence: Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
/// _LOCAL_SIZE), Slurm's srun (SLURM_PROCID, SLURM_NTASKS or SLURM_STEP_NUM_TASKS, SLURM_LOCALID,
/// SLURM_STEP_TASKS_PER_NODE's first count), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT). Slurm's variables are only taken inside a job step (SLURM_STEP_ID set), as a
/// batch script's own variables describe the allocation, not this process. `getenv` is injectable for
/// tests. Throws ConfigError naming the variable when a value is not a number or rank >= size.
LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv);

/// read_launch_env(std::getenv).
LaunchEnv launch_env();

}  // namespace pcdino
