// The pipeline's stages as one table, in the spirit of nccl-tests' `struct testColl`: a stage is a row
// (its name, what it reads, which stages it waits for, which configuration keys decide its outputs, how
// Slurm launches it), and everything that handles stages (the submitter, the batch scripts, completion
// markers and resume hashes, status, `slurm.time_limit`) reads this table instead of naming stages itself.
//
// The chain (the workshop's order; labels need no model, so they run beside the features; the health check
// runs beside meanstd when doctor.enabled):
//   meanstd --+--> train -> extract --+--> knn -> plots
//   doctor ---+                       |
//   labels ---------------------------+
#pragma once

#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino {

/// The Slurm allocation a stage's job asks for.
struct StageResources {
  int nodes = 0;           ///< --nodes; 0 = left to Slurm
  int tasks_per_node = 0;  ///< --ntasks-per-node; 0 = not given
  int tasks = 0;           ///< --ntasks; 0 = not given
  int gpus_per_node = 0;   ///< --gpus-per-node when the configuration asks for GPUs (slurm.gpus)
};

/// One stage of the pipeline.
struct StageSpec {
  const char* name;     ///< the `pcdino` subcommand that runs it, and its name in --stages, markers, logs
  const char* summary;  ///< one line for the batch script's header
  std::vector<const char*> after;  ///< stages whose outputs it reads (direct dependencies)
  /// Key-path prefixes of the configuration that decide its outputs ("meta", "train_scDINO",
  /// "downstream_analyses.kNN"): its resume hash covers exactly the schema's keys under them (keys that
  /// only locate the run, output_dir and name_of_run, excepted), plus the hashes of `after`.
  std::vector<const char*> reads;
  bool accelerated;  ///< uses GPUs when there are some: --exclusive and slurm.environment apply
  bool threaded;     ///< takes --threads (slurm.cpus_per_task)
  bool requeues;     ///< checkpoints on SIGUSR1/SIGTERM and requeues itself (exit 75) when slurm.requeue
  StageResources (*resources)(const PipelineConfig&);  ///< its allocation under `config`
  /// The bool key that puts the stage in the pipeline ("doctor.enabled"); nullptr = always in it.
  const char* switch_key = nullptr;
  /// A check, not a producer: it writes nothing a later stage reads, so the stages that wait for it do not
  /// take its hash into theirs, it is never skipped as complete, and it runs again whenever one of them is
  /// submitted (it checks the nodes as they are now).
  bool check = false;
  /// Runs in the batch script itself and starts its own job step (srun with slurm.mpi) from options it
  /// reads out of the configuration, so that its ranks read nothing from the shared filesystem.
  bool launches_itself = false;
};

/// Every stage in submission order (a stage comes after the stages it waits for).
const std::vector<StageSpec>& pipeline_stages();

/// Whether `stage` is part of the pipeline under `config` (its switch_key, when it has one, is true).
bool stage_enabled(const StageSpec& stage, const PipelineConfig& config);

/// The row of stage `name`, or nullptr when no stage has that name.
const StageSpec* find_stage(const std::string& name);

/// The row of stage `name`. Throws ConfigError naming `origin` (e.g. "--stages") and the known stages.
const StageSpec& stage_spec(const std::string& name, const std::string& origin = "stage");

/// The stages' names joined by ", " (for messages).
std::string stage_names();

/// Whether key `path` of the configuration schema decides the outputs of `stage` (one of its `reads`
/// prefixes covers it and the key does not merely locate the run).
bool stage_reads_key(const StageSpec& stage, const std::string& path);

}  // namespace pcdino
