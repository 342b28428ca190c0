// The dataset every stage reads from the shared filesystem (FSx for Lustre at /fsx on ParallelCluster),
// in either of two layouts that give the same images in the same order:
//   - class folders, as torchvision's ImageFolder defines them: classes are the sorted first-level
//     sub-folders of the dataset directory; files (.tif/.tiff/.png/.jpg/.jpeg) are found recursively,
//     ordered as sorted(os.walk(...)) visits them (by folder path, then file name);
//   - packed: `pcdino dataset pack` shards in a few large HDF5 files described by `pack.json`, because
//     tens of thousands of small files are Lustre's worst case.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "pcdino/core/image.hpp"

namespace pcdino {

class MpiWorld;
struct MetaConfig;

/// Name of the file that marks a packed dataset directory.
inline constexpr const char* kPackManifest = "pack.json";

class Dataset {
 public:
  /// Opens `dataset_dir` (packed if it holds pack.json, else class folders). A file's label is the name
  /// of the folder `folder_depth_for_labels` levels above it (0 = its parent), as scDINO defines it.
  /// Throws NoInputError if the directory is missing, DataError if it holds no class folder or a class
  /// folder holds no image (naming it), ConfigError if a file lies fewer than folder_depth_for_labels + 1
  /// folders below the dataset directory.
  static Dataset open(const std::string& dataset_dir, int folder_depth_for_labels = 0);

  /// open() for all ranks of `world` at once: rank 0 scans the class folders and sends the index to the
  /// others, so a job makes one directory scan instead of one per rank (on Lustre every scan loads the
  /// metadata server). A packed dataset is opened by each rank (its index is in the HDF5 files). An error
  /// on rank 0 is thrown on every rank, with the same exit code and message.
  static Dataset open(const std::string& dataset_dir, int folder_depth_for_labels, const MpiWorld& world);

  /// The pipeline's dataset: open(meta.dataset_dir, meta.folder_depth_for_labels), and with `world` its
  /// one-scan form. Every stage opens it through these, so the two keys are read in one place.
  static Dataset open(const MetaConfig& meta);
  static Dataset open(const MetaConfig& meta, const MpiWorld& world);

  /// Number of images N.
  std::size_t size() const;
  /// Sorted class names (first-level folders); class_index() indexes this.
  const std::vector<std::string>& classes() const;
  /// Sorted distinct labels (folder names at the label depth); label_index() indexes this.
  const std::vector<std::string>& labels() const;
  /// Path of image `i` relative to the dataset directory ("Coat/train_00012.tif").
  const std::string& relative_path(std::size_t i) const;
  /// Absolute or dataset-relative path for messages (the file, or "shard.h5[row]" when packed).
  std::string source(std::size_t i) const;
  int class_index(std::size_t i) const;
  int label_index(std::size_t i) const;
  /// True for the packed layout.
  bool packed() const;
  const std::string& directory() const;

  /// Reads image `i` as stored. Safe to call from several threads at once.
  /// Throws DataError/NoInputError as read_image() does, naming the file (or shard and row).
  RawImage read(std::size_t i) const;

  /// Reads, then applies preprocess() with `transform`: [C, H, W] floats in [0, 1].
  Image load(std::size_t i, const ImageTransform& transform) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace pcdino
