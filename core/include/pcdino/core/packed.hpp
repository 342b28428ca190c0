// The packed dataset layout: a dataset in a few large HDF5 files (shards) plus a JSON manifest.
//
//   pack.json                     {"format": "pcdino-pack", "version": 1, "num_images": N, "height": H,
//                                  "width": W, "channels": C, "pixel_type": "uint16", "classes": [...],
//                                  "channel_names": ["aTub", "BF", ...],
//                                  "shards": [{"file": "shard-00000-of-00004.h5", "first": 0, "count": n}]}
//   shard-00000-of-00004.h5       /images       [n, H, W, C] uint8|uint16|float32, chunked [1, H, W, C]
//                                 /class_index  [n] int32   (index into "classes")
//                                 /paths        [n] string  (path relative to the original dataset)
//                                 /indices      [n] int64   (index in the dataset's order)
//                                 attributes pixel_type, height, width, channels, channel_names, shard,
//                                 num_shards
//
// Pixels are stored exactly as read (bit-identical), so every stage gets the same images from either
// layout.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "pcdino/core/image.hpp"

namespace pcdino {

class Dataset;

/// Options of pack_dataset().
struct PackOptions {
  std::size_t images_per_shard = 0;  ///< 0: about 1 GiB of pixels per shard
  int threads = 2;                   ///< decoding threads
  bool overwrite = false;            ///< replace an existing pack in the output directory
  /// Names of the image channels (meta.channel_dict); missing ones are named by their index.
  std::vector<std::string> channel_names;
};

/// What pack_dataset() wrote.
struct PackReport {
  std::size_t images = 0;
  std::size_t shards = 0;
  std::size_t bytes = 0;  ///< pixel bytes
  double seconds = 0;
};

/// Writes every image of `source` (in its order) into `output_dir`. Each shard is written under a
/// temporary name and renamed when complete; pack.json is written last, so a killed pack is never taken
/// for a complete one. Throws DataError naming both files if two images differ in shape or pixel type
/// (the packed layout needs one shape), CantCreateError if the output cannot be written or a pack exists
/// there and `overwrite` is false.
PackReport pack_dataset(const Dataset& source, const std::string& output_dir, const PackOptions& options);

/// Read access to a packed dataset (used by Dataset).
class PackedReader {
 public:
  /// Opens `dir`/pack.json and its shards. Throws DataError naming the file if a shard is missing or does
  /// not match the manifest.
  explicit PackedReader(const std::string& dir);
  ~PackedReader();
  PackedReader(const PackedReader&) = delete;
  PackedReader& operator=(const PackedReader&) = delete;

  std::size_t size() const;
  const std::vector<std::string>& classes() const;
  const std::vector<std::string>& paths() const;          ///< relative paths, in dataset order
  const std::vector<int>& class_indices() const;          ///< in dataset order
  const std::vector<std::string>& channel_names() const;  ///< one per image channel
  /// "dir/shard-00000-of-00004.h5[row 12]" for messages.
  std::string source(std::size_t i) const;
  /// Image `i` as stored. Thread-safe (HDF5 calls are serialised).
  RawImage read(std::size_t i) const;

 private:
  void open_shards(const std::string& dir, const nlohmann::json& shards);  // with the HDF5 lock held

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pcdino
