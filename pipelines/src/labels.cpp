#include "pcdino/pipelines/labels.hpp"

#include <algorithm>
#include <filesystem>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/pipelines/features.hpp"

namespace pcdino::pipelines {

std::vector<std::size_t> held_out_images(const PipelineConfig& config, const Dataset& dataset) {
  auto held_out =
      train_heldout_split(dataset.size(), config.meta.train_datasetsplit_fraction, config.meta.seed).held_out;
  if (held_out.empty()) {
    throw DataError(dataset.directory() + ": the held-out split is empty (" + std::to_string(dataset.size()) +
                    " images, meta.train_datasetsplit_fraction " +
                    std::to_string(config.meta.train_datasetsplit_fraction) +
                    "): lower the fraction so that some images are held out for evaluation");
  }
  std::sort(held_out.begin(), held_out.end());
  return held_out;
}

std::string channel_names_suffix(const PipelineConfig& config) {
  const auto& channels = config.selected_channels();
  if (channels.empty()) return "_all";
  std::string s;
  for (int c : channels) {
    const auto it = config.meta.channel_dict.find(c);
    s += "_" + (it != config.meta.channel_dict.end() ? it->second : std::to_string(c));
  }
  return s;
}

LabelsReport run_labels_stage(const PipelineConfig& config) {
  const Dataset dataset = Dataset::open(config.meta);
  const auto images = held_out_images(config, dataset);
  std::vector<std::string> labels, paths;
  for (std::size_t i : images) {
    labels.push_back(dataset.labels()[static_cast<std::size_t>(dataset.label_index(i))]);
    paths.push_back(dataset.relative_path(i));
  }
  LabelsReport report;
  report.images = images.size();
  report.directory = RunLayout(config).features_dir;
  write_label_csvs(report.directory, labels, paths);
  return report;
}

}  // namespace pcdino::pipelines
