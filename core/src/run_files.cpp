#include "pcdino/core/run_files.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pcdino/core/error.hpp"

namespace pcdino {

namespace {
std::string in(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}
}  // namespace

std::string ModelFiles::checkpoint() const {
  return in(dir, "checkpoint.pth");
}
std::string ModelFiles::epoch_checkpoint(int epoch) const {
  return in(dir, fmt::format("checkpoint{:04}.pth", epoch));
}
std::string ModelFiles::training_log() const {
  return in(dir, "log.txt");
}
std::string ModelFiles::metrics() const {
  return in(dir, "metrics.jsonl");
}

RunLayout::RunLayout(const PipelineConfig& config)
    : run_dir(config.run_dir()),
      mean_std(in(run_dir, "mean_and_std_of_dataset.txt")),
      config_dump(in(run_dir, "run_config_dump.yaml")),
      skipped_images(in(run_dir, "skipped_images.txt")),
      model{in(in(run_dir, "scDINO_ViTs"), config.train.dino_vit_name)},
      features_dir(in(run_dir, "CLS_features")),
      features(in(features_dir, "features.h5")),
      knn_dir(in(run_dir, "kNN")),
      knn_text(in(knn_dir, "global_kNN.txt")),
      knn_json(in(knn_dir, "knn.json")),
      plots_dir(in(run_dir, "plots")),
      plots_index(in(plots_dir, "index.html")),
      logs_dir(in(run_dir, "logs")),
      submitted_config(in(logs_dir, "submitted_pipeline.yaml")),
      job_state(in(logs_dir, "pipeline_jobs.json")) {}

std::string RunLayout::stage_script(const std::string& stage) const {
  return in(logs_dir, stage + ".sbatch");
}
std::string RunLayout::stage_marker(const std::string& stage) const {
  return in(logs_dir, stage + ".complete");
}
std::string RunLayout::stage_output(const std::string& stage, const std::string& job, bool error) const {
  return in(logs_dir, stage + (error ? "_err_" : "_out_") + job + (error ? ".err" : ".out"));
}

std::string features_csv(const std::string& dir, const std::string& channel_names, const std::string& model) {
  return in(dir, "channel" + channel_names + "_model_" + model + "_features.csv");
}
std::string class_labels_csv(const std::string& dir) {
  return in(dir, "class_labels.csv");
}
std::string image_paths_csv(const std::string& dir) {
  return in(dir, "image_paths.csv");
}

std::string format_mean_std(const MeanStdValues& values) {
  const nlohmann::json j = {{"mean", values.mean}, {"std", values.std}};
  return j.dump() + "\n";
}

MeanStdValues read_mean_std(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NoInputError("cannot read mean/std file '" + path + "' (run `pcdino meanstd` first)");
  MeanStdValues v;
  try {
    const auto j = nlohmann::json::parse(in);
    v.mean = j.at("mean").get<std::vector<double>>();
    v.std = j.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": expected {\"mean\": [...], \"std\": [...]}: " + e.what());
  }
  if (v.mean.size() != v.std.size() || v.mean.empty()) {
    throw DataError(path + ": \"mean\" and \"std\" must be non-empty lists of the same length");
  }
  for (double s : v.std) {
    if (!(s > 0)) throw DataError(path + ": every std must be > 0 (a constant channel cannot be normalised)");
  }
  return v;
}

}  // namespace pcdino
