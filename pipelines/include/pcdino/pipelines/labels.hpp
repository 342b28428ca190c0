// The labels stage (scDINO's extract_labels): the class label and path of every held-out image, the rows
// the CLS feature stage embeds, without a model forward pass.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino {
class Dataset;
}

namespace pcdino::pipelines {

/// The images every downstream stage works on: the held-out split (1 - meta.train_datasetsplit_fraction of
/// the dataset, from meta.seed, the images the model never trained on), in dataset order.
/// Throws DataError naming the dataset directory if the split is empty.
std::vector<std::size_t> held_out_images(const PipelineConfig& config, const Dataset& dataset);

/// scDINO's name of the selected channel combination: "_" before each channel's name from
/// meta.channel_dict ("_aTub_BF"); a channel without a name is written as its index; "_all" when no
/// combination is selected.
std::string channel_names_suffix(const PipelineConfig& config);

struct LabelsReport {
  std::size_t images = 0;
  std::string directory;  ///< {run_dir}/CLS_features
};

/// Writes `{run_dir}/CLS_features/class_labels.csv` and `image_paths.csv` for held_out_images().
/// Throws the dataset layer's errors and CantCreateError.
LabelsReport run_labels_stage(const PipelineConfig& config);

}  // namespace pcdino::pipelines
