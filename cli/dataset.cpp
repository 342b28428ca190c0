// pcdino dataset import | pack | check
#include "pcdino/core/dataset.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/packed.hpp"
#include "pcdino/pipelines/dataset_check.hpp"
#include "pcdino/pipelines/dataset_import.hpp"

namespace pcdino::cli {

namespace {

struct ImportArgs {
  pipelines::ImportOptions options;
  std::string class_names;
};

struct PackArgs {
  app::ConfigOptions config;
  std::string output;
  std::size_t images_per_shard = 0;
  int threads = 0;
  bool overwrite = false;
};

struct CheckArgs {
  app::ConfigOptions config;
  std::string dataset_dir;
  int threads = 0;
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

}  // namespace

void add_dataset_commands(CLI::App& app) {
  CLI::App* dataset = app.add_subcommand(
      "dataset", "Import a labelled dataset, pack it into HDF5 shards, or check what it holds");
  dataset->require_subcommand(1);

  auto import_args = std::make_shared<ImportArgs>();
  import_args->options.source_dir = "/usr/share/datasets/fashion-mnist";
  CLI::App* imp = dataset->add_subcommand(
      "import",
      "Write IDX files (MNIST, Fashion-MNIST) as class-folder TIFFs: {out}/{class}/{split}_{index}.tif");
  imp->add_option("--source", import_args->options.source_dir,
                  "Folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")
      ->capture_default_str();
  imp->add_option("-o,--out", import_args->options.output_dir,
                  "Dataset folder to write (one sub-folder per class)")
      ->required();
  imp->add_option("--split", import_args->options.split, "Which split: train, test or all")
      ->check(CLI::IsMember({"train", "test", "all"}))
      ->capture_default_str();
  imp->add_option("--per-class", import_args->options.per_class,
                  "At most this many images per class and split, the first in file order (0 = all)")
      ->capture_default_str();
  imp->add_option(
      "--class-names", import_args->class_names,
      "Comma-separated folder names for labels 0, 1, ... (default: Fashion-MNIST's when the source "
      "is fashion-mnist, else the label numbers)");
  imp->add_option("--threads", import_args->options.threads, "Writer threads")->capture_default_str();
  imp->callback([import_args] {
    if (!import_args->class_names.empty())
      import_args->options.class_names = split_commas(import_args->class_names);
    const pipelines::ImportReport r = pipelines::import_idx_dataset(import_args->options);
    std::string counts;
    for (std::size_t c = 0; c < r.class_names.size(); ++c) {
      counts += (c ? ", " : "") + r.class_names[c] + " " + std::to_string(r.per_class[c]);
    }
    spdlog::info("imported {} images into {} in {:.1f} s ({:.0f} images/s): {}", r.images,
                 import_args->options.output_dir, r.seconds, r.images / std::max(r.seconds, 1e-9), counts);
  });

  auto pack_args = std::make_shared<PackArgs>();
  CLI::App* pack = dataset->add_subcommand(
      "pack",
      "Pack a class-folder dataset into large HDF5 files for Lustre (read transparently by every stage)");
  app::add_config_options(pack, pack_args->config, /*required=*/false);
  pack->add_option("-o,--out", pack_args->output, "Folder for pack.json and the HDF5 shards")->required();
  pack->add_option("--images-per-shard", pack_args->images_per_shard,
                   "Images per shard (0 = about 1 GiB each)")
      ->capture_default_str();
  pack->add_option("--threads", pack_args->threads, "Decoding threads (0 = all cores)")
      ->capture_default_str();
  pack->add_flag("--overwrite", pack_args->overwrite, "Replace a pack already in the output folder");
  pack->callback([pack_args] {
    const PipelineConfig config = pack_args->config.load();
    const Dataset source = Dataset::open(config.meta);
    PackOptions options;
    options.images_per_shard = pack_args->images_per_shard;
    options.threads = app::default_threads(pack_args->threads, 1);
    options.overwrite = pack_args->overwrite;
    for (const auto& [index, name] : config.meta.channel_dict) {
      if (options.channel_names.size() <= static_cast<std::size_t>(index))
        options.channel_names.resize(index + 1);
      options.channel_names[static_cast<std::size_t>(index)] = name;
    }
    for (std::size_t c = 0; c < options.channel_names.size(); ++c) {
      if (options.channel_names[c].empty()) options.channel_names[c] = std::to_string(c);
    }
    const PackReport r = pack_dataset(source, pack_args->output, options);
    spdlog::info(
        "packed {} images ({:.1f} MiB of pixels) from {} into {} shard(s) in {} in {:.1f} s ({:.0f} "
        "images/s)",
        r.images, r.bytes / 1048576.0, config.meta.dataset_dir, r.shards, pack_args->output, r.seconds,
        r.images / std::max(r.seconds, 1e-9));
  });

  auto check_args = std::make_shared<CheckArgs>();
  CLI::App* check = dataset->add_subcommand(
      "check",
      "Decode every image of a dataset as the stages will and print their shapes, channels, sample types and "
      "layouts (one page, tifffile's shaped series, ImageJ, OME-XML, packed). Exit 65 if an image cannot be "
      "read or the channel counts differ (the first differing file named)");
  check->alias("info");
  check->add_option("dataset", check_args->dataset_dir, "Dataset folder (class folders or a packed dataset)");
  app::add_config_options(check, check_args->config, /*required=*/false);
  check->add_option("--threads", check_args->threads, "Decoding threads (0 = all cores)")
      ->capture_default_str();
  check->callback([check_args] {
    std::string dir = check_args->dataset_dir;
    int depth = 0;
    if (!check_args->config.path.empty() || !check_args->config.dataset_dir.empty()) {
      if (!dir.empty()) throw ConfigError("dataset check: give the dataset folder or --config, not both");
      if (check_args->config.path.empty()) {
        dir = check_args->config.dataset_dir;
      } else {
        const PipelineConfig config = check_args->config.load();
        dir = config.meta.dataset_dir;
        depth = config.meta.folder_depth_for_labels;
      }
    }
    if (dir.empty())
      throw ConfigError("dataset check: name the dataset folder (or give --config pipeline.yaml)");
    const Dataset data = Dataset::open(dir, depth);
    const pipelines::DatasetCheck result =
        pipelines::check_dataset(data, app::default_threads(check_args->threads, 1));
    std::fputs(pipelines::format_dataset_check(result, dir).c_str(), stdout);
    std::fflush(stdout);
    if (!result.ok()) {
      throw DataError(dir + ": " +
                      (result.channel_mismatch.empty()
                           ? std::to_string(result.unreadable.size()) +
                                 " image(s) cannot be read: " + result.unreadable.front()
                           : "channel counts differ: " + result.channel_mismatch));
    }
  });
}

}  // namespace pcdino::cli
