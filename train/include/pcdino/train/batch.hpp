// A training step's input: one image's multi-crop (augment.hpp) for each sample, stacked per crop into the
// tensors the step takes. What a DataLoader worker and default_collate do in main_dino.py.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/image.hpp"
#include "pcdino/train/augment.hpp"

namespace pcdino::train {

/// One batch of crops: crops[k] is [B, C, S_k, S_k] floats (the 2 global crops, then the local ones).
using Batch = std::vector<at::Tensor>;

/// Batch memory given back for the next batch. A batch's 100 MB at the workshop's crops (64 images, 2 x
/// 224 + 8 x 96 px, 5 channels), newly mapped for every batch, cost a page fault per 4 KiB on first touch:
/// a quarter of a loader thread's time, more with several threads, which fault under one lock
/// (bench/loader.sh). A pinned batch is not pooled: LibTorch's caching host allocator reuses pinned memory
/// and knows when a copy to the GPU still reads it. Safe to use from several threads at once.
class BatchPool {
 public:
  /// Tensors of `shapes` (floats, uninitialised): a pooled batch that nothing but the pool holds any more
  /// (no tensor, view or storage of it alive outside), else new ones. Keeps up to `kept` batches.
  Batch take(const std::vector<std::vector<int64_t>>& shapes);

  static constexpr std::size_t kept = 16;

 private:
  std::mutex mutex_;
  std::vector<Batch> batches_;
};

/// What make_batch does with an image it cannot read (Dataset::load throws DataError: a truncated or
/// corrupt file), when meta.skip_corrupt says to go on: a warning names the file and the first readable
/// image of `spares`, in order, takes its place (with that image's own seed).
struct CorruptImages {
  std::vector<std::size_t> spares;  ///< dataset indices to take instead, e.g. the rank's next step's
  std::size_t skipped = 0;          ///< out: images of the batch that were replaced
};

/// Loads `indices` from `ds` with `transform` (Dataset::load), makes each one's multi_crop() with the seed
/// sample_seed(seed, epoch, index), and stacks them: B = indices.size(). `pinned`: page-locked host memory,
/// so that the copy to a GPU overlaps with compute. Throws DataError naming the file when an image has not
/// the channels of the normalisation (or of the batch's first image), and what Dataset::load throws;
/// with `corrupt`, an unreadable image is replaced instead (CorruptImages), and its DataError is thrown
/// only when none of the spares can be read either. With `pool` (and not `pinned`), the
/// tensors come from it.
Batch make_batch(const Dataset& ds, const std::vector<std::size_t>& indices, const ImageTransform& transform,
                 const MultiCropOptions& crops, std::uint64_t seed, int epoch, bool pinned,
                 BatchPool* pool = nullptr, CorruptImages* corrupt = nullptr);

}  // namespace pcdino::train
