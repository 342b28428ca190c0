// `pcdino dataset check`: what the stages will read from a dataset, before a long job reads it. Every
// image is decoded as the stages decode it; the report groups them by shape, channels, sample type and
// how their files were laid out (one page, tifffile's shaped series, ImageJ, OME-XML, packed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pcdino/core/dataset.hpp"

namespace pcdino::pipelines {

/// Images that share height, width, channels, sample type and layout.
struct ImageGroup {
  int height = 0;
  int width = 0;
  int channels = 0;
  PixelType type = PixelType::kUint8;
  std::string layout;     ///< how their files were read (read_image's layout line; "packed HDF5" when packed)
  std::size_t count = 0;  ///< images in the group
  std::string example;    ///< the first of them in dataset order (dataset-relative path)
};

/// What check_dataset() found.
struct DatasetCheck {
  std::size_t images = 0;
  std::vector<std::pair<std::string, std::size_t>> classes;  ///< class folder and its image count, sorted
  std::vector<ImageGroup> groups;                            ///< in order of their first image
  std::vector<std::string> unreadable;  ///< "path: reason" of images that failed to decode
  /// Empty when every readable image has the first readable image's channel count; else names the first
  /// image in dataset order that differs, and that first image.
  std::string channel_mismatch;
  double seconds = 0;  ///< wall time of the scan

  /// True when every image decoded and all have one channel count: what the stages need.
  bool ok() const { return unreadable.empty() && channel_mismatch.empty(); }
};

/// Decodes every image of `dataset` on `threads` threads, in dataset order, and groups them. Never
/// throws for a bad image (it is listed in `unreadable`); throws what Dataset throws for the folder itself.
DatasetCheck check_dataset(const Dataset& dataset, int threads);

/// The report as text for a terminal: a line for the dataset, the classes, a table of the groups, notes
/// (an image with more channels than rows or columns may have been written channels first), and the
/// verdict. `dataset_dir` names the dataset in the first line.
std::string format_dataset_check(const DatasetCheck& check, const std::string& dataset_dir);

}  // namespace pcdino::pipelines
