// The CLS feature file of a run, `{run_dir}/CLS_features/features.h5`, written by `pcdino extract` and
// read by the kNN and plot stages:
//
//   /features     [N, D] float32   CLS embeddings (L2-normalised when the stage's `normalize` is true)
//   /labels       [N] int32        class index (into /class_names)
//   /class_names  [C] string       sorted class folder names
//   /paths        [N] string       image path relative to the dataset directory
//   /indices      [N] int64        image index in the dataset's order
//   attributes    checkpoint, checkpoint_key, epoch, arch, patch_size, channels, normalized
//
// Rows are in dataset order. Features, labels and paths live in one file so that their rows cannot be
// misaligned (scDINO's separate CSV files once were). The workshop's CSV exports are written beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pcdino::pipelines {

struct FeatureSet {
  std::size_t rows = 0;                  ///< N
  std::size_t dim = 0;                   ///< D
  std::vector<float> features;           ///< [N, D], row-major
  std::vector<int> labels;               ///< [N] class index
  std::vector<std::string> class_names;  ///< [C]
  std::vector<std::string> paths;        ///< [N] relative to the dataset directory
  std::vector<std::int64_t> indices;     ///< [N] dataset index
  // Provenance, stored as attributes.
  std::string checkpoint;      ///< file the weights came from ("" for a randomly initialised network)
  std::string checkpoint_key;  ///< "teacher" or "student"
  int epoch = -1;              ///< epochs the checkpoint had finished (-1: unknown / random)
  std::string arch;
  int patch_size = 0;
  std::string channels;  ///< the selected channel combination ("01234"; "" for all)
  bool normalized = false;

  /// Throws DataError naming `source` if the sizes of the arrays disagree or a label is out of range.
  void check(const std::string& source) const;
};

/// Writes `set` to `path` atomically (temporary name, then rename). Throws CantCreateError, DataError
/// (via check()).
void write_features(const std::string& path, const FeatureSet& set);

/// Reads a file written by write_features(). Throws NoInputError if it is missing, DataError naming the
/// file and the dataset or attribute if one is missing, of another rank, type or count, or claims more
/// values than 4096 times the file's size (checked before they are allocated), or the sizes disagree.
FeatureSet read_features(const std::string& path);

/// The workshop's CSV exports in `dir`: `channel{_names}_model_{model}_features.csv` (N rows of D
/// comma-separated values, full float precision), `class_labels.csv` (class name per row) and
/// `image_paths.csv` (relative path per row). `channel_names` is scDINO's "_aTub_BF". Returns the
/// features CSV's path. Each file is written atomically. Throws CantCreateError.
std::string write_feature_csvs(const std::string& dir, const FeatureSet& set,
                               const std::string& channel_names, const std::string& model);

/// The labels stage's exports without features, in `dir`: `class_labels.csv` (`class_names[i]`, the class
/// name of row i) and `image_paths.csv` (`paths[i]`). Throws CantCreateError.
void write_label_csvs(const std::string& dir, const std::vector<std::string>& class_names,
                      const std::vector<std::string>& paths);

}  // namespace pcdino::pipelines
