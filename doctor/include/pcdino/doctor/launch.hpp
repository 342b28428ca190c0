// How `pcdino doctor` runs: one rank per node of an allocation. Launched in a batch script or salloc shell it
// becomes a step of every node (srun); with --submit a batch job of its own (sbatch --wait); as one of the
// step's ranks it runs the check (run_doctor()) and rank 0 publishes the verdict.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

/// How the check is launched and where its verdict goes, beside what it checks (DoctorOptions).
struct LaunchOptions {
  std::string json;                    ///< doctor.json, written by rank 0 ("" = none)
  bool drain = false;                  ///< run the scontrol drain line of each unhealthy node (else printed)
  std::string mpi = "pmix";            ///< srun's --mpi plugin
  std::vector<std::string> forwarded;  ///< the options the step's ranks get
  /// The pcdino program the step runs (absolute path), asked only where a step is launched: a rank never
  /// needs it.
  std::function<std::string()> program;
  std::string
      logs_dir;  ///< a run's logs folder, made where the check is launched, never by a rank ("" = none)
  bool submit = false;                       ///< a batch job of its own (submit())
  int nodes = 0;                             ///< its nodes
  int gpus_per_node = -1;                    ///< GPUs each node's task gets (-1 or 0: none asked for)
  std::string partition;                     ///< its partition ("" = Slurm's default)
  std::string time = "10:00";                ///< its time limit
  std::string log = "pcdino-doctor-%j.out";  ///< its output file (%j: the job id)
};

/// With a pipeline file (`config`, its paths absolute: sbatch::with_absolute_paths()), the check as its
/// doctor stage runs it: `options` from the file (apply_config()), the ranks handed them as options
/// (section_arguments(): a node without the shared filesystem could not read the file), drain and srun's
/// --mpi from doctor.drain and slurm.mpi, the report to the run's logs/doctor.json unless launch.json names
/// one, and where not given the job's nodes, GPUs and partition from the training's.
void apply_pipeline(const PipelineConfig& config, DoctorOptions& options, LaunchOptions& launch);

/// The step that runs the check on every node: `srun --ntasks-per-node=1 --mpi=MPI --kill-on-bad-exit=1
/// PROGRAM doctor FORWARDED...`.
std::vector<std::string> step_command(const LaunchOptions& launch);

/// Runs the check as the environment asks (making launch.logs_dir first unless this process is a rank):
/// launch.submit, a batch job of its own (submit()); in an allocation ($SLURM_JOB_ID) but not in a step
/// ($SLURM_STEP_ID, or mpirun's $OMPI_COMM_WORLD_SIZE), replaced by the step (step_command(), execvp);
/// else one rank of the step (run_rank()). Throws Error(kUsage) for launch.submit without launch.nodes,
/// Error(kUnavailable) when srun cannot be run, and what submit() and run_rank() throw.
void run_check(const DoctorOptions& options, const LaunchOptions& launch);

/// The step as a batch job of launch.nodes nodes, one task each (`sbatch --wait --wrap`), waited for; prints
/// its output file (sbatch's stderr when there is none). Throws Error(kFailure) naming the job, its exit code
/// and its output file when it fails (an unhealthy node's check fails it), Error(kUnavailable) when sbatch
/// cannot be run.
void submit(const LaunchOptions& launch);

/// One rank of the step: starts MPI (a rank whose peers do not join within options.answer_seconds ends the
/// process with exit code 1, naming its node), runs run_doctor(), writes this rank's node's verdict as
/// Prometheus metrics in options.textfile_dir, and on rank 0 publish()es. Unhealthy: throws Error(kFailure)
/// with summary(), or, when a node did not answer, says so on stderr and ends the job (MPI_Abort, exit 1).
void run_rank(const DoctorOptions& options, const LaunchOptions& launch);

/// What rank 0 prints and writes: the table (stdout), doctor.json (launch.json) and each unhealthy node's
/// drain line, printed or, with launch.drain, run and its outcome printed.
void publish(const DoctorReport& report, const LaunchOptions& launch);

}  // namespace pcdino::doctor
