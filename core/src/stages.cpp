#include "pcdino/core/stages.hpp"

#include <algorithm>

#include "pcdino/core/error.hpp"

namespace pcdino {

namespace {

// Ranks of an MPI stage on each node: one per GPU, or num_gpus ranks on a CPU-only cluster.
int ranks_per_node(int num_gpus) {
  return std::max(1, num_gpus);
}

StageResources training(const PipelineConfig& c) {
  return {c.train.nnodes, ranks_per_node(c.train.num_gpus), 0, c.train.num_gpus};
}
StageResources features(const PipelineConfig& c) {
  const int gpus = c.downstream.compute_cls_features.num_gpus;
  return {1, ranks_per_node(gpus), 0, gpus};
}
StageResources cpu_ranks(const PipelineConfig& c) {
  return {0, 0, c.slurm.cpu_tasks, 0};  // ranks spread over as many nodes as they need
}
StageResources one_task(const PipelineConfig&) {
  return {1, 0, 1, 0};
}
// The health check: one task on each node training will take, with the GPUs it will ask for.
StageResources training_nodes(const PipelineConfig& c) {
  return {c.train.nnodes, 1, 0, c.train.num_gpus};
}

}  // namespace

const std::vector<StageSpec>& pipeline_stages() {
  // name, summary, after, reads, accelerated, threaded, requeues, resources[, switch_key, check,
  // launches_itself]
  static const std::vector<StageSpec> stages = {
      {"doctor",
       "health check of the training's nodes (pcdino doctor)",
       {},
       {"doctor"},
       true,
       false,
       false,
       training_nodes,
       "doctor.enabled",
       true,
       true},
      {"meanstd",
       "per-channel mean and std of the dataset",
       {},
       {"meta", "train_scDINO.fraction_for_mean_std_calc"},
       false,
       true,
       false,
       cpu_ranks},
      {"train",
       "DINO pretraining of the ViT",
       {"doctor", "meanstd"},
       {"meta", "train_scDINO"},
       true,
       true,
       true,
       training},
      {"extract",
       "CLS features of the held-out images",
       {"train"},
       {"meta", "downstream_analyses.compute_cls_features"},
       true,
       true,
       false,
       features},
      {"labels", "class labels of the held-out images", {}, {"meta"}, false, false, false, one_task},
      {"knn",
       "weighted kNN evaluation of the CLS features",
       {"extract", "labels"},
       {"meta", "downstream_analyses.kNN"},
       false,
       true,
       false,
       one_task},
      {"plots",
       "UMAP, training curves, kNN plots and index.html",
       {"knn"},
       {"meta", "downstream_analyses.umap_eval"},
       false,
       false,
       false,
       one_task},
  };
  return stages;
}

bool stage_enabled(const StageSpec& stage, const PipelineConfig& config) {
  return stage.switch_key == nullptr || config_value(config, stage.switch_key) == "true";
}

std::string stage_names() {
  std::string names;
  for (const auto& s : pipeline_stages()) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return names;
}

const StageSpec* find_stage(const std::string& name) {
  for (const auto& s : pipeline_stages()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

const StageSpec& stage_spec(const std::string& name, const std::string& origin) {
  if (const StageSpec* s = find_stage(name)) return *s;
  throw ConfigError(origin + ": '" + name + "' is not a stage (" + stage_names() + ")");
}

bool stage_reads_key(const StageSpec& stage, const std::string& path) {
  if (config_key(path).locates) return false;
  return std::any_of(stage.reads.begin(), stage.reads.end(), [&](const std::string& prefix) {
    return path == prefix || path.rfind(prefix + ".", 0) == 0;
  });
}

}  // namespace pcdino
