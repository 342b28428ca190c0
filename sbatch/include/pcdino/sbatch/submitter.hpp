// `pcdino submit|resume|status|logs|cancel`: the pipeline as a chain of Slurm jobs, driven through Slurm's
// own commands (sbatch --parsable, scontrol show job, sacct, scancel), with the job ids of the last
// submission kept in `{run_dir}/logs/pipeline_jobs.json`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/sbatch/scripts.hpp"

namespace pcdino::sbatch {

/// `config` with meta.dataset_dir and meta.output_dir made absolute against `base` (the submitting
/// shell's directory), as the jobs run in the run folder. Throws ConfigError when the run folder's path
/// holds whitespace or quotes, which #SBATCH lines cannot carry.
PipelineConfig with_absolute_paths(PipelineConfig config, const std::string& base);

struct SubmitOptions {
  std::vector<Stage> stages;  ///< the stages to submit (empty: those the configuration turns on); a check
                              ///< that is on joins every submission of a stage that waits for it
  bool resume = false;        ///< skip stages whose completion marker matches their configuration hash
  bool dry_run = false;       ///< print the scripts and sbatch commands; write and submit nothing
  std::string pcdino;         ///< the pcdino program the scripts run (absolute path)
};

struct SubmittedJob {
  Stage stage;
  std::string job_id;  ///< "$meanstd" style shell variables with --dry-run
  std::vector<Stage> after;
};

struct SubmitReport {
  std::vector<SubmittedJob> jobs;
  std::vector<Stage> complete;  ///< stages skipped as complete (resume)
};

/// Refuses container settings a job would fail on, naming the key (ConfigError, exit 78), before anything is
/// written or submitted: slurm.container_image with slurm.launcher mpirun (Pyxis acts on srun's steps); an
/// image path that is not a file here (the head node sees the shared filesystem as the nodes do); a mount
/// source that does not exist here; meta.dataset_dir or the run folder not inside the container at its own
/// path (a mount SRC:SRC, or SRC alone, above it), since the scripts hand the ranks host paths. With
/// `srun_help` (srun --help's text; "" = not asked), an srun without --container-image: Pyxis not loaded.
/// `config` must hold absolute paths. Nothing is checked when slurm.container_image is "".
void check_container_settings(const PipelineConfig& config, const std::string& srun_help);

/// Whether `scontrol show config`'s text `config` describes a cluster with expedited requeues: its
/// SLURM_VERSION has them (core/slurm_features.hpp: 25.11+) and SlurmctldParameters lists
/// enable_expedited_requeue (without it slurmctld refuses --requeue=expedite: "Expedited requeue requested
/// but not enabled", job_mgr.c of 25.11.7). ParallelCluster cannot turn it on: SlurmctldParameters is on its
/// CustomSlurmSettings deny list (cluster/upstream's schema data).
bool expedites_requeues(const std::string& config);

/// expedites_requeues() of this cluster (`scontrol show config`); false where scontrol cannot be run or
/// fails.
bool cluster_expedites_requeues();

/// Writes the configuration the jobs read (logs/submitted_pipeline.yaml) and one script per stage
/// (render_script()), submits them in order with `sbatch --parsable` chained by afterok dependencies,
/// and records the job ids in logs/pipeline_jobs.json (merged with the stages not resubmitted). Prints
/// a line per job to `out` (with --dry-run: every script and the sbatch commands instead).
/// `config` must hold absolute paths (with_absolute_paths()). Throws Error(kTempFail) when jobs of the
/// run are still queued or running (cancel them or wait), Error(kUnavailable) when sbatch cannot be
/// run, Error(kSoftware) naming the stage and sbatch's message when sbatch refuses a job (the jobs
/// already submitted are cancelled), CantCreateError when the logs folder cannot be written.
SubmitReport submit_pipeline(const PipelineConfig& config, const SubmitOptions& options, std::ostream& out);

/// One start of a requeued job after its first (pcdino's own records: the batch script's start line and the
/// trainer's "resuming from" line in the stage's stderr file, and logs/{stage}_restarts.jsonl).
struct StageRestart {
  int start = 0;        ///< 2 for the first restart (the script's "(start N)")
  std::string time;     ///< when it started (ISO 8601)
  std::string nodes;    ///< where (SLURM_JOB_NODELIST)
  std::string after;    ///< why the start before it ended: its exit, nodes and reason as the script
                        ///< recorded them, or "requeued by Slurm" where the script recorded none
  std::string resumed;  ///< the checkpoint it resumed from: "E epochs" or "E epochs and I iterations", or ""
                        ///< (not yet, or there was none)
};

/// What Slurm (or, after it forgot the job, the completion marker) says about one stage.
struct StageStatus {
  Stage stage;
  std::string job_id;     ///< "" if never submitted
  std::string state;      ///< Slurm's job state (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...),
                          ///< or NOT_SUBMITTED, or COMPLETE (marker only) / UNKNOWN when Slurm forgot it
  std::string elapsed;    ///< run time, [D-]HH:MM:SS
  std::string exit_code;  ///< Slurm's "code:signal"
  std::string reason;     ///< Slurm's reason (Dependency, NonZeroExitCode, DependencyNeverSatisfied, ...)
  std::string error;      ///< for a failed stage: the last error line of its stderr file; for one that never
                          ///< started because a stage it waits for failed: "not started: stage X FAILED: ..."
  int restarts = 0;       ///< times the job was requeued
  Stage blocked_by;       ///< the failed stage that kept it from starting (the first up the chain), or ""
  std::vector<StageRestart> restart_log;  ///< each start after the first, oldest first
};

/// The state of every stage of the last submission (and of the pipeline's stages not submitted): `scontrol
/// show job`, then `sacct` when Slurm no longer holds the job and accounting answers, then the completion
/// marker. A stage Slurm cancelled because a stage it waits for failed names that stage and its error. Throws
/// NoInputError when the run was never submitted (no logs/pipeline_jobs.json).
std::vector<StageStatus> pipeline_status(const PipelineConfig& config);

/// pipeline_status() as a table on `out`, then each restart of a stage (when, where, why, the epoch it
/// resumed from). Returns true if no stage failed, timed out or was cancelled.
bool print_status(const PipelineConfig& config, std::ostream& out);

/// Cancels (scancel) the jobs of the last submission that are still queued or running; returns them as
/// "stage job_id". Throws NoInputError when the run was never submitted.
std::vector<std::string> cancel_pipeline(const PipelineConfig& config);

/// Prints the last `lines` lines of `stage`'s stdout and stderr files of its last job (`stream`: "out",
/// "err" or "both"). Throws ConfigError for an unknown stage, NoInputError when it was never submitted
/// or its files do not exist yet.
void print_logs(const PipelineConfig& config, const Stage& stage, int lines, const std::string& stream,
                std::ostream& out);

}  // namespace pcdino::sbatch
