// The pipeline's stages (core/stages.hpp's table) as Slurm batch scripts: the submission plan, what each
// stage's completion marker records, and the script text `pcdino submit` writes into `{run_dir}/logs/`.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/stages.hpp"

namespace pcdino::sbatch {

/// A stage's name as in pipeline_stages() ("meanstd", "train", ...).
using Stage = std::string;

/// Every stage's name in submission order (pipeline_stages()).
std::vector<Stage> all_stages();

/// The stages of the pipeline under `config` (those whose switch key is on), in submission order.
std::vector<Stage> enabled_stages(const PipelineConfig& config);

/// The stages `stage` waits for: those it reads the outputs of and the checks before it (direct only).
std::vector<Stage> stage_dependencies(const Stage& stage);

/// Whether `stage` waits for `other` directly (`other` is among stage_dependencies(stage)).
bool waits_for(const Stage& stage, const Stage& other);

/// Parses a comma-separated list ("train,extract", "all"). Throws ConfigError naming `origin` (e.g.
/// "--stages") and the known names for an unknown stage. The result is in submission order.
std::vector<Stage> parse_stages(const std::string& list, const std::string& origin);

/// One hash per stage (16 hex digits, FNV-1a 64 of text) of the configuration that decides its outputs:
/// the schema's keys that the stage's row reads (StageSpec::reads; not output_dir or name_of_run, which
/// name where the run is) and the hashes of the stages it depends on (checks excepted), so that a changed key
/// re-runs the stages that read it and everything after them. The `slurm` section decides none.
std::map<Stage, std::string> stage_config_hashes(const PipelineConfig& config);

/// An exit of the training step that a requeueing stage's script answers with `scontrol requeue`.
struct RestartExit {
  const char* pattern;  ///< the step's exit codes, as a shell `case` pattern
  const char* why;      ///< recorded in logs/{stage}_restarts.jsonl and shown by `pcdino status`
  bool fault;           ///< counts against slurm.max_restarts (a time limit or preemption does not)
};

/// The exits a requeueing stage restarts on, in the order the script tests them: 75 (the trainer's agreed
/// checkpoint on SIGUSR1/SIGTERM), 74 (its watchdog: a peer silent for --comm-timeout), 14 (Open MPI 5's
/// own end of a rank whose peer was lost: MPI_ERR_UNKNOWN from its fatal handler), 17 (Open MPI 4's:
/// MPI_ERR_INTERN from MPI_ERRORS_ARE_FATAL in the collective the lost peer left) and 129-255 (srun's code
/// for a task ended by signal N is 128 + N: a rank killed with its node, by the OOM killer or by hand).
/// Any other exit (bad input, a bug) ends the job.
const std::vector<RestartExit>& restart_exits();

/// Where pcdino's container images install it (scripts/container-image, container/Dockerfile).
inline constexpr const char* kContainerPcdino = "/opt/pcdino/bin/pcdino";

/// Pyxis's options for a stage's step (https://github.com/NVIDIA/pyxis, srun --help with Pyxis loaded):
/// --container-image=slurm.container_image, --container-mounts= slurm.container_mounts joined by commas
/// (none when empty) and --container-workdir= the run folder. Empty when slurm.container_image is "".
std::vector<std::string> container_options(const PipelineConfig& config);

/// The programs a script runs.
struct ScriptOptions {
  std::string pcdino;  ///< absolute path of the pcdino program on the compute nodes
  /// The cluster has expedited requeues (cluster_expedites_requeues()): a requeueing stage asks for
  /// `--requeue=expedite`, so that its own requeues are eligible again at once (not after cred_expire), and
  /// sets its job's Requeue=0 before any exit that ends it for good (Slurm 25.11 holds an expedited job whose
  /// script ends non-zero, with no failed epilog, instead of failing it: src/slurmctld/job_mgr.c of 25.11.7).
  bool expedited_requeue = false;
};

/// The batch script of `stage`: #SBATCH resources from `config.slurm`, train_scDINO.nnodes/num_gpus and
/// compute_cls_features.num_gpus; output files {stage}_out_%j.out / {stage}_err_%j.err in the logs folder
/// (appended to, so that a requeued job keeps its first part); one task per GPU (or per num_gpus on a
/// CPU-only cluster) launched with `srun --mpi=...` or `mpirun` (a stage that launches itself, the doctor,
/// runs in the script and starts its step); `slurm.environment` exported (training and
/// CLS features) unless spank_pcdino.so is in the cluster's plugstack; the training stage with --requeue
/// (--requeue=expedite with ScriptOptions::expedited_requeue) and
/// --signal=USR1@signal_seconds, requeueing itself when the trainer exits 75 after checkpointing or after a
/// fault (restart_exits()) while it has started again after fewer than slurm.max_restarts faults (each
/// requeue recorded in logs/{stage}_restarts.jsonl; a start over the budget fails with exit 79,
/// ExitCode::kRestartsSpent); on success the completion marker with `config_hash`, written to a temporary
/// name and renamed. `config` must hold absolute paths (the script runs in the run folder). With
/// slurm.container_image, every stage's step but the doctor's runs the image's pcdino (kContainerPcdino) with
/// container_options() and PMIX_MCA_gds=hash (a PMIx client in a container cannot attach the server's
/// shared-memory store).
std::string render_script(const PipelineConfig& config, const Stage& stage, const ScriptOptions& options,
                          const std::string& config_hash);

/// One job of a submission.
struct PlannedJob {
  Stage stage;
  std::vector<Stage> after;  ///< stages of the same submission it waits for (afterok)
};

/// The jobs to submit for `selected` stages (all when empty): a stage in `complete` is skipped unless a
/// stage it reads is submitted, so that nothing reads outputs about to be replaced. A check
/// (StageSpec::check) is submitted when a stage that waits for it is, or when no selected stage waits for
/// it; whether it is complete does not matter. Dependencies on stages outside the submission are dropped
/// (their outputs are taken as they are).
std::vector<PlannedJob> plan_jobs(const std::vector<Stage>& selected, const std::set<Stage>& complete);

/// The sbatch command line of a planned job (without the script path): --parsable and, when it waits for
/// other jobs, --dependency=afterok:ID[:ID] and --kill-on-invalid-dep=yes. `job_ids` maps the stages
/// already submitted to their ids (or to shell variables for --dry-run).
std::vector<std::string> sbatch_arguments(const PlannedJob& job, const std::map<Stage, std::string>& job_ids);

}  // namespace pcdino::sbatch
