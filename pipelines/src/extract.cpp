#include "pcdino/pipelines/extract.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/core/staging.hpp"
#include "pcdino/monitoring/metrics.hpp"
#include "pcdino/pipelines/features.hpp"
#include "pcdino/pipelines/labels.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/process.hpp"
#include "pcdino/train/vit.hpp"

namespace pcdino::pipelines {

namespace fs = std::filesystem;
namespace F = torch::nn::functional;
using train::VisionTransformer;
using train::VitOptions;

namespace {

// The model features come from: none (raw pixels), an untrained ViT of the config's architecture (seeded
// by meta.seed), or the checkpoint's backbone (its path and epoch into `report`).
train::PretrainedVit extractor_model(const PipelineConfig& config, const ExtractOptions& options,
                                     const MeanStdValues& ms, const RunLayout& layout,
                                     ExtractReport& report) {
  train::PretrainedVit model;
  if (options.raw_pixels) {
    model.arch = "raw_pixels";
  } else if (options.random_init) {
    torch::manual_seed(config.meta.seed);
    const auto& h = config.train.hyperparameters;
    model.vit = VisionTransformer(VitOptions::from_config(h, static_cast<int>(ms.mean.size())));
    model.arch = h.arch;
  } else {
    report.checkpoint = options.checkpoint.empty() ? layout.model.checkpoint() : options.checkpoint;
    model =
        train::load_pretrained_vit(report.checkpoint, config.downstream.compute_cls_features.checkpoint_key);
    report.epoch = model.epoch;
  }
  return model;
}

// Every rank's `local` rows [n, dim] to rank 0, which writes the feature file (and the CSVs) of `images`
// in their order with the dataset's labels and paths. Called by all ranks together.
void write_gathered(const PipelineConfig& config, const ExtractOptions& options, const MpiWorld& world,
                    const Dataset& dataset, const std::vector<std::size_t>& images,
                    const std::vector<float>& local, std::size_t dim, const train::PretrainedVit& model,
                    ExtractReport& report) {
  const auto& cls = config.downstream.compute_cls_features;
  // Gather: ranks hold every size()-th image; pad each rank's rows to the largest shard.
  const std::size_t rows_max =
      (images.size() + static_cast<std::size_t>(world.size()) - 1) / static_cast<std::size_t>(world.size());
  std::vector<double> send(rows_max * dim, 0.0);
  std::copy(local.begin(), local.end(), send.begin());
  const std::vector<double> all = world.gather(send);
  report.images = images.size();
  report.dim = dim;
  if (world.rank() == 0) {
    FeatureSet set;
    set.rows = images.size();
    set.dim = dim;
    set.features.resize(set.rows * set.dim);
    for (std::size_t r = 0; r < set.rows; ++r) {
      const std::size_t rank = r % static_cast<std::size_t>(world.size()),
                        row = r / static_cast<std::size_t>(world.size());
      const std::size_t from = (rank * rows_max + row) * set.dim;
      for (std::size_t j = 0; j < set.dim; ++j)
        set.features[r * set.dim + j] = static_cast<float>(all[from + j]);
    }
    set.class_names = dataset.labels();
    for (std::size_t i : images) {
      set.labels.push_back(dataset.label_index(i));
      set.paths.push_back(dataset.relative_path(i));
      set.indices.push_back(static_cast<std::int64_t>(i));
    }
    set.checkpoint = report.checkpoint;
    set.checkpoint_key = options.raw_pixels    ? "raw_pixels"
                         : options.random_init ? "random"
                                               : cls.checkpoint_key;
    set.epoch = report.epoch;
    set.arch = model.arch;
    set.patch_size = model.vit ? model.vit->options.patch_size : 0;
    set.channels = config.channel_combination_name();
    set.normalized = cls.normalize;
    write_features(report.output, set);
    if (options.write_csv) {
      const std::string model_name = options.raw_pixels    ? "raw_pixels"
                                     : options.random_init ? "random_init"
                                                           : fs::path(report.checkpoint).stem().string();
      write_feature_csvs(fs::path(report.output).parent_path().string(), set, channel_names_suffix(config),
                         model_name);
    }
  }
}

}  // namespace

ExtractReport run_extract_stage(const PipelineConfig& config, const MpiWorld& world,
                                const ExtractOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  monitoring::MetricsFile metrics({config.monitoring.textfile_dir, config.monitoring.interval_seconds},
                                  monitoring::labels_from_environment("extract", world.rank()));
  if (options.threads > 0) torch::set_num_threads(options.threads);
  train::share_blas_threads(world.local_size(), options.threads);
  const auto& cls = config.downstream.compute_cls_features;
  ExtractReport report;
  const RunLayout layout(config);
  report.output = options.output.empty() ? layout.features : options.output;

  const MeanStdValues ms = read_mean_std(layout.mean_std);
  train::PretrainedVit model = extractor_model(config, options, ms, layout, report);
  const torch::Device device = train::select_device(
      train::device_option(options.device, config.slurm.accelerator), world.local_rank());
  if (model.vit) {
    model.vit->eval();
    model.vit->to(device);
  }
  const int channels = model.vit ? model.vit->options.in_channels : static_cast<int>(ms.mean.size());
  if (static_cast<std::size_t>(channels) != ms.mean.size()) {
    throw DataError((report.checkpoint.empty() ? std::string("the model") : report.checkpoint) + " takes " +
                    std::to_string(channels) + " input channels but " + layout.mean_std +
                    " has statistics for " + std::to_string(ms.mean.size()));
  }

  std::optional<StagedDataset> staged;  // train_scDINO.stage_dataset's copy on this node
  const Dataset dataset = Dataset::open(meta_with_staged_dataset(config, staged), world);
  const auto images = held_out_images(config, dataset);
  const auto mine = shard(images, world.rank(), world.size());
  const ImageTransform transform{config.selected_channels(), config.meta.center_crop};
  const auto mean =
      torch::tensor(std::vector<float>(ms.mean.begin(), ms.mean.end())).view({1, -1, 1, 1}).to(device);
  const auto stdev =
      torch::tensor(std::vector<float>(ms.std.begin(), ms.std.end())).view({1, -1, 1, 1}).to(device);
  const std::size_t batch = static_cast<std::size_t>(std::max(1, cls.batch_size_per_gpu));
  const std::size_t batches = (mine.size() + batch - 1) / batch;

  // Each batch: [B, C, H, W] in [0, 1], as read and preprocessed.
  Prefetcher<torch::Tensor> loader(
      batches,
      [&](std::size_t b) {
        std::vector<torch::Tensor> items;
        for (std::size_t i = b * batch; i < std::min(mine.size(), (b + 1) * batch); ++i) {
          Image img = dataset.load(mine[i], transform);
          if (img.channels != channels) {
            throw DataError(dataset.source(mine[i]) + " has " + std::to_string(img.channels) +
                            " channels after meta.selected_channel_combination_per_run, but " +
                            (report.checkpoint.empty() ? std::string("the model") : report.checkpoint) +
                            " takes " + std::to_string(channels));
          }
          items.push_back(torch::from_blob(img.data.data(), {img.channels, img.height, img.width}).clone());
        }
        return torch::stack(items);
      },
      options.loader_threads > 0 ? options.loader_threads : std::max(1, cls.num_workers), 4);
  std::vector<float> local;
  int64_t dim = model.vit ? model.vit->options.embed_dim : 0;
  {
    torch::NoGradGuard no_grad;
    int64_t embedded = 0;
    for (std::size_t b = 0; b < batches; ++b) {
      torch::Tensor x = loader.next()->to(device);
      if (cls.resize && (x.size(2) != cls.resize_length || x.size(3) != cls.resize_length)) {
        x = F::interpolate(x, F::InterpolateFuncOptions()
                                  .size(std::vector<int64_t>{cls.resize_length, cls.resize_length})
                                  .mode(torch::kBilinear)
                                  .align_corners(false));
      }
      x = (x - mean) / stdev;
      // [B, D]: the CLS tokens, or the normalised pixels themselves (D = C * H * W).
      auto f = model.vit ? model.vit->forward(x) : x.flatten(1);
      if (!model.vit) dim = f.size(1);
      if (cls.normalize) f = F::normalize(f, F::NormalizeFuncOptions().dim(1).p(2));
      f = f.to(torch::kCPU).contiguous();
      local.insert(local.end(), f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
      embedded += f.size(0);
      metrics.add("pcdino_extract_images_total", static_cast<double>(f.size(0)));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      metrics.set("pcdino_extract_images_per_second",
                  static_cast<double>(embedded) / std::max(seconds, 1e-9));
    }
  }

  if (!model.vit) dim = world.allreduce_max(dim);  // a rank without images learns the width from the others
  write_gathered(config, options, world, dataset, images, local, static_cast<std::size_t>(dim), model,
                 report);
  if (staged) staged->release(!config.train.keep_staged_dataset);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.images_per_second = static_cast<double>(report.images) / std::max(seconds, 1e-9);
  return report;
}

}  // namespace pcdino::pipelines
