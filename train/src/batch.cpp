#include "pcdino/train/batch.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cstring>
#include <string>
#include <utility>

#include "pcdino/core/error.hpp"

namespace pcdino::train {

namespace {

bool only_the_pool_holds(const Batch& batch) {
  for (const at::Tensor& t : batch) {
    if (t.use_count() != 1 || t.storage().use_count() != 1) return false;
  }
  return true;
}

bool has_shapes(const Batch& batch, const std::vector<std::vector<int64_t>>& shapes) {
  if (batch.size() != shapes.size()) return false;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    if (batch[k].sizes() != c10::IntArrayRef(shapes[k])) return false;
  }
  return true;
}

// Dataset image `idx`, or with `corrupt` the first readable spare in its place: (its index, the image).
std::pair<std::size_t, Image> load_or_spare(const Dataset& ds, std::size_t idx,
                                            const ImageTransform& transform, CorruptImages* corrupt) {
  try {
    return {idx, ds.load(idx, transform)};
  } catch (const DataError& e) {
    if (corrupt == nullptr) throw;
    for (std::size_t spare : corrupt->spares) {
      try {
        Image image = ds.load(spare, transform);
        spdlog::warn("meta.skip_corrupt: {}; {} takes its place in this batch", e.what(), ds.source(spare));
        ++corrupt->skipped;
        return {spare, std::move(image)};
      } catch (const DataError&) {
        // that one is unreadable too: the next spare
      }
    }
    throw;
  }
}

}  // namespace

Batch BatchPool::take(const std::vector<std::vector<int64_t>>& shapes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Batch& pooled : batches_) {
    if (has_shapes(pooled, shapes) && only_the_pool_holds(pooled)) {
      Batch copy = pooled;  // the pool's own reference stays, so the batch comes back once its user is done
      return copy;
    }
  }
  Batch batch;
  for (const auto& shape : shapes) batch.push_back(torch::empty(shape, torch::kFloat32));
  if (batches_.size() < kept) {
    batches_.push_back(batch);
  } else {
    // Full of batches of other shapes or still in use: forget one nobody holds, if any, for this one.
    for (Batch& pooled : batches_) {
      if (only_the_pool_holds(pooled)) {
        pooled = batch;
        break;
      }
    }
  }
  return batch;
}

Batch make_batch(const Dataset& ds, const std::vector<std::size_t>& indices, const ImageTransform& transform,
                 const MultiCropOptions& crops, std::uint64_t seed, int epoch, bool pinned, BatchPool* pool,
                 CorruptImages* corrupt) {
  const std::vector<int> sizes = multi_crop_sizes(crops);
  Batch batch;
  std::vector<float*> rows(sizes.size());
  std::size_t channels = 0;
  for (std::size_t b = 0; b < indices.size(); ++b) {
    const auto [idx, image] = load_or_spare(ds, indices[b], transform, corrupt);
    if (b == 0) {
      // Every image must have the channels the normalisation has (or the batch's first one has).
      channels = crops.mean.empty() ? std::size_t(image.channels) : crops.mean.size();
      std::vector<std::vector<int64_t>> shapes;
      for (int size : sizes)
        shapes.push_back({static_cast<int64_t>(indices.size()), static_cast<int64_t>(channels), size, size});
      if (pool != nullptr && !pinned) {
        batch = pool->take(shapes);
      } else {
        for (const auto& shape : shapes)
          batch.push_back(torch::empty(shape, torch::TensorOptions().pinned_memory(pinned)));
      }
    }
    if (std::size_t(image.channels) != channels) {
      throw DataError(ds.source(idx) + " has " + std::to_string(image.channels) + " channel(s) after " +
                      "meta.selected_channel_combination_per_run, the dataset's other images " +
                      std::to_string(channels) +
                      " (`pcdino dataset check` lists the images by channel count)");
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      rows[k] = batch[k].data_ptr<float>() + b * channels * std::size_t(sizes[k]) * std::size_t(sizes[k]);
    }
    multi_crop_into(image, crops, sample_seed(seed, epoch, idx), rows);
  }
  return batch;
}

}  // namespace pcdino::train
