// pcdino's training loader alone, without the step: the images a DINO training's data side makes per
// second (read and decode, preprocess, every crop and augmentation, the batch tensors the step takes),
// with THREADS loader threads as `pcdino train --loader-threads`. bench/loader.sh runs DINO's
// DataAugmentationDINO in a torch DataLoader (bench/loader_reference.py) beside it on the same files.
//
//   build/bench/pcdino_loader_bench DATASET [--threads N] [--images N] [--batch B] [--global-size PX]
//       [--local-size PX] [--local-crops N] [--rgb] [--channels I,J,...] [--seed S] [--no-pool]
//
// Prints one JSON line: {"threads", "images", "seconds", "images_per_second", "batch", "crops": [...]}.
// Not timed: a warm-up of the loader (page cache, and the batches its BatchPool reuses, made).
#include <ATen/core/Tensor.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/train/augment.hpp"
#include "pcdino/train/batch.hpp"

namespace {

using pcdino::train::Batch;

struct Options {
  std::string dataset;
  int threads = 1, images = 512, batch = 32, local_crops = 8;
  int global_size = 224, local_size = 96;
  bool rgb = false, pool = true;
  std::vector<int> channels;
  unsigned seed = 40;
};

int run(const Options& o) {
  pcdino::train::run_opencv_on_calling_threads();  // as pcdino train: one loader thread, one core
  const pcdino::Dataset ds = pcdino::Dataset::open(o.dataset);
  pcdino::train::MultiCropOptions crops;
  crops.global_crops_size = o.global_size;
  crops.local_crops_size = o.local_size;
  crops.local_crops_number = o.local_crops;
  crops.rgb = o.rgb;
  crops.vflip = !o.rgb;
  const pcdino::ImageTransform transform{o.channels, 0};
  // Normalised as a training is (the mean/std stage's values; their value does not change the cost).
  const int channels = o.channels.empty() ? ds.load(0, transform).channels : int(o.channels.size());
  crops.mean.assign(std::size_t(channels), 0.5);
  crops.std.assign(std::size_t(channels), 0.25);

  const auto batch = std::size_t(o.batch);
  const std::size_t steps = std::max<std::size_t>(1, std::size_t(o.images) / batch);
  pcdino::train::BatchPool pool;  // as pcdino train on a CPU (a GPU's pinned batches: LibTorch's own reuse)
  const auto produce = [&](std::size_t k) {
    std::vector<std::size_t> indices(batch);
    for (std::size_t b = 0; b < batch; ++b) indices[b] = (k * batch + b) % ds.size();
    return pcdino::train::make_batch(ds, indices, transform, crops, o.seed, 0, false,
                                     o.pool ? &pool : nullptr);
  };
  // Untimed first: one batch on this thread (caches warm), then as many as the loader holds at once (the
  // pool's batches made, as after a training's first steps); then the loader from its start.
  std::vector<std::string> shapes;
  for (const at::Tensor& t : produce(steps)) {
    const auto s = t.sizes();
    shapes.push_back("[" + std::to_string(s[0]) + "," + std::to_string(s[1]) + "," + std::to_string(s[2]) +
                     "," + std::to_string(s[3]) + "]");
  }
  const auto capacity = std::size_t(2 * o.threads);
  {
    pcdino::Prefetcher<Batch> warm(capacity + std::size_t(o.threads) + 1, produce, o.threads, capacity);
    while (warm.next()) {
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::size_t images = 0;
  {
    pcdino::Prefetcher<Batch> loader(steps, produce, o.threads, capacity);
    while (auto b = loader.next()) images += std::size_t(b->front().size(0));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string crops_json;
  for (std::size_t i = 0; i < shapes.size(); ++i) crops_json += (i ? ",\"" : "\"") + shapes[i] + "\"";
  std::printf(
      "{\"threads\": %d, \"images\": %zu, \"seconds\": %.3f, \"images_per_second\": %.2f, \"batch\": %d, "
      "\"crops\": [%s]}\n",
      o.threads, images, seconds, double(images) / seconds, o.batch, crops_json.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"pcdino's training loader alone (read, decode, multi-crop, batch tensors): images/s"};
  app.add_option("dataset", o.dataset, "class folders of images or a packed dataset")->required();
  app.add_option("--threads", o.threads, "loader threads (pcdino train --loader-threads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--images", o.images, "images to time after the first batch")->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "images per batch (batch_size_per_gpu)")->check(CLI::PositiveNumber);
  app.add_option("--global-size", o.global_size, "global crop side, pixels")->check(CLI::PositiveNumber);
  app.add_option("--local-size", o.local_size, "local crop side, pixels")->check(CLI::PositiveNumber);
  app.add_option("--local-crops", o.local_crops, "local crops per image")->check(CLI::NonNegativeNumber);
  app.add_flag("--rgb", o.rgb, "DINO's RGB pipeline (meta.images_are_RGB)");
  app.add_option("--channels", o.channels, "channels to keep (meta.selected_channel_combination_per_run)")
      ->delimiter(',');
  app.add_option("--seed", o.seed, "the augmentation's seed");
  app.add_flag("!--no-pool", o.pool, "new batch tensors for every batch (no BatchPool)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pcdino_loader_bench: %s\n", e.what());
    return 65;
  }
}
