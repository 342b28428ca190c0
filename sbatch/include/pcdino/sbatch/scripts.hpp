// The pipeline's stages as Slurm batch scripts: which stage waits for which, what each one's completion
// marker records, and the script text `pcdino submit` writes into `{run_dir}/logs/`.
//
// The chain (workshop order; labels need no model, so they run beside the features):
//   meanstd -> train -> extract --+--> knn -> plots
//   labels ------------------------+
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino::sbatch {

/// A stage's name as in kPipelineStages ("meanstd", "train", ...).
using Stage = std::string;

/// Every stage in submission order (kPipelineStages).
std::vector<Stage> all_stages();

/// The stages `stage` reads the outputs of (direct dependencies only).
std::vector<Stage> stage_dependencies(const Stage& stage);

/// Parses a comma-separated list ("train,extract", "all"). Throws ConfigError naming `origin` (e.g.
/// "--stages") and the known names for an unknown stage. The result is in submission order.
std::vector<Stage> parse_stages(const std::string& list, const std::string& origin);

/// One hash per stage (16 hex digits, FNV-1a 64 of text) of the configuration that decides its outputs:
/// the `meta` keys (not output_dir or name_of_run, which name where the run is), the stage's own section
/// and the hashes of the stages it depends on, so that a changed key re-runs its stage and everything
/// after it. The `slurm` section decides none.
std::map<Stage, std::string> stage_config_hashes(const PipelineConfig& config);

/// Where a run's submission files live: `{run_dir}/logs/`.
struct RunFiles {
  std::string logs_dir;     ///< {run_dir}/logs
  std::string config_file;  ///< logs/submitted_pipeline.yaml: the configuration the jobs read
  std::string state_file;   ///< logs/pipeline_jobs.json: job ids of the last submission

  explicit RunFiles(const PipelineConfig& config);
  std::string script(const Stage& stage) const;  ///< logs/{stage}.sbatch
  std::string marker(const Stage& stage) const;  ///< logs/{stage}.complete: JSON with config_hash
  /// logs/{stage}_out_{job}.out (or _err_ .err with `error`); job "%j" gives sbatch's pattern.
  std::string output(const Stage& stage, const std::string& job, bool error) const;
};

/// The programs a script runs.
struct ScriptOptions {
  std::string pcdino;  ///< absolute path of the pcdino program on the compute nodes
};

/// The batch script of `stage`: #SBATCH resources from `config.slurm`, train_scDINO.nnodes/num_gpus and
/// compute_cls_features.num_gpus; output files {stage}_out_%j.out / {stage}_err_%j.err in the logs folder
/// (appended to, so that a requeued job keeps its first part); one task per GPU (or per num_gpus on a
/// CPU-only cluster) launched with `srun --mpi=...` or `mpirun`; `slurm.environment` exported (training and
/// CLS features) unless spank_pcdino.so is in the cluster's plugstack; the training stage with --requeue and
/// --signal=USR1@signal_seconds, requeueing itself when the trainer exits 75 after checkpointing; on
/// success the completion marker with `config_hash`, written to a temporary name and renamed. `config`
/// must hold absolute paths (the script runs in the run folder).
std::string render_script(const PipelineConfig& config, const Stage& stage, const ScriptOptions& options,
                          const std::string& config_hash);

/// One job of a submission.
struct PlannedJob {
  Stage stage;
  std::vector<Stage> after;  ///< stages of the same submission it waits for (afterok)
};

/// The jobs to submit for `selected` stages (all when empty): a stage in `complete` is skipped unless a
/// stage it depends on is submitted, so that nothing reads outputs about to be replaced. Dependencies on
/// stages outside the submission are dropped (their outputs are taken as they are).
std::vector<PlannedJob> plan_jobs(const std::vector<Stage>& selected, const std::set<Stage>& complete);

/// The sbatch command line of a planned job (without the script path): --parsable and, when it waits for
/// other jobs, --dependency=afterok:ID[:ID] and --kill-on-invalid-dep=yes. `job_ids` maps the stages
/// already submitted to their ids (or to shell variables for --dry-run).
std::vector<std::string> sbatch_arguments(const PlannedJob& job, const std::map<Stage, std::string>& job_ids);

}  // namespace pcdino::sbatch
