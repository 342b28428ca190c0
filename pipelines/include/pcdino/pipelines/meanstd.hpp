// Stage 1 of the pipeline: per-channel mean and population std of the dataset, over all pixels of a
// sample of the images after the per-image min-max scaling (scDINO's mean_std_dataset.py, with an exact
// one-pass-per-image computation instead of its batched second moment).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/run_files.hpp"

namespace pcdino::pipelines {

/// Count, mean and sum of squared deviations (M2) of one channel's pixels. Accumulated in double; images
/// and ranks are combined with Chan et al.'s pairwise update, so the result does not depend on how the
/// pixels were split up (up to rounding).
struct Moments {
  double count = 0;
  double mean = 0;
  double m2 = 0;

  /// Adds `n` values (two passes over them: their mean, then their squared deviations).
  void add(const float* values, std::size_t n);
  /// Merges another set of moments into this one (Chan, Golub & LeVeque 1979, eq. 2.1b).
  void merge(const Moments& other);
  /// Population variance M2 / count (0 for an empty set).
  double variance() const;
};

/// Per-channel moments of the images `indices` of `dataset`, preprocessed with `transform`, read by
/// `threads` decoding threads. With `skip_corrupt`, images that fail to decode are left out and described
/// in `skipped` ("path: reason"); otherwise the first such image's DataError propagates. Throws DataError
/// naming two files when the images disagree in channel count (the first read, and the first that differs).
/// `on_image`, if set, is called after each image is counted (progress, metrics).
std::vector<Moments> accumulate_moments(const Dataset& dataset, const std::vector<std::size_t>& indices,
                                        const ImageTransform& transform, int threads, bool skip_corrupt,
                                        std::vector<std::string>* skipped,
                                        const std::function<void()>& on_image = {});

/// What one rank of the stage did.
struct MeanStdReport {
  MeanStdValues values;          ///< on rank 0 (empty elsewhere)
  std::size_t images = 0;        ///< images this rank read
  std::size_t total_images = 0;  ///< images all ranks read (rank 0)
  std::size_t skipped = 0;       ///< corrupt images skipped by all ranks (rank 0)
  double seconds = 0;            ///< wall time of reading and accumulating on this rank
  std::string output_file;       ///< mean_and_std_of_dataset.txt
};

/// The whole stage on one rank of `world`: samples fraction_for_mean_std_calc of the dataset with
/// meta.seed, reads this rank's shard of the sample, combines all ranks' moments on rank 0 and writes
/// `{run_dir}/mean_and_std_of_dataset.txt` and `{run_dir}/run_config_dump.yaml` atomically (plus
/// skipped_images.txt when images were skipped). Throws the dataset layer's errors, naming the file.
MeanStdReport run_meanstd_stage(const PipelineConfig& config, const MpiWorld& world, int threads);

}  // namespace pcdino::pipelines
