// What spank_pcdino.so sets in each task's environment: the launcher-neutral rank variables that
// PyTorch-style programs read (the contract of torchrun and of enroot's PyTorch hook), OMP_NUM_THREADS,
// the chosen profile's variables, and per-task device visibility. Pure functions, tested without Slurm.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pcdino/spank/profiles.hpp"

namespace pcdino::spank {

/// What Slurm tells the plugin about one task (spank_get_item and the step's environment).
struct TaskInfo {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;           ///< S_JOB_STEPID
  std::uint32_t global_rank = 0;       ///< S_TASK_GLOBAL_ID
  std::uint32_t local_rank = 0;        ///< S_TASK_ID
  std::uint32_t world_size = 1;        ///< S_JOB_TOTAL_TASK_COUNT (tasks of the step)
  std::uint32_t local_world_size = 1;  ///< S_JOB_LOCAL_TASK_COUNT (tasks of the step on this node)
  std::string step_nodelist;           ///< SLURM_STEP_NODELIST, e.g. "queue-st-p4d-[1-4]"
  int cpus_per_task = 0;               ///< SLURM_CPUS_PER_TASK when the user asked for it, else 0
  bool omp_num_threads_set = false;    ///< the job already sets OMP_NUM_THREADS (then it is left alone)
  std::string visible_devices;         ///< the step's device list as Slurm set it ("0,1,2,3"), or ""
  /// IPv4 address of the step's first node as this node resolves it (the plugin fills it for profiles
  /// with a root_comm_variable()), or "".
  std::string master_ip;
  /// The batch script (or extern/interactive) step: one process that is no rank of anything; it gets
  /// the profile's variables (for an mpirun inside the script) but no rank variables and no binding,
  /// which its srun steps would otherwise inherit.
  bool batch_step = false;
};

/// Inclusive range of TCP ports MASTER_PORT is drawn from.
struct PortRange {
  int low = 29500;
  int high = 29999;
};

/// The first host of a Slurm host list: "node[07-09,12],gpu1" -> "node07"; "a,b" -> "a". Throws
/// std::invalid_argument for an empty or malformed list.
std::string first_host(const std::string& nodelist);

/// The devices of a visibility list: "0,1,2" and "0-2" (a vendor runtime's range) are 0, 1, 2;
/// an item that is not a range of two numbers ("GPU-8f0e...") is one device.
std::vector<std::string> device_list(const std::string& visible);

/// low + (job_id + 7919 step_id) mod (high - low + 1): every task of a step agrees; neighbouring jobs,
/// and steps of one job running side by side, differ.
int master_port(std::uint32_t job_id, std::uint32_t step_id, const PortRange& range);

/// The variables to set for one task, in order: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
/// MASTER_ADDR (left out if the host list cannot be parsed), MASTER_PORT, OMP_NUM_THREADS (from
/// cpus_per_task; 1 when several tasks share the node and none was asked; not set if the job sets it), then
/// the profile's variables whose conditions hold for `versions`, then (with `bind_per_task` and a profile
/// with devices) the device variable narrowed to device[local_rank mod count] (so each task sees its one
/// device as device 0, whatever its LOCAL_RANK). `profile` may be null (--accel-profile=none). For a batch
/// step only the profile's variables. The plugin sets all of them over the job's environment: the admin's
/// profile is authoritative.
std::vector<std::pair<std::string, std::string>> task_environment(
    const TaskInfo& task, const Profile* profile, const std::map<std::string, Version>& versions,
    bool bind_per_task, const PortRange& ports);

}  // namespace pcdino::spank
