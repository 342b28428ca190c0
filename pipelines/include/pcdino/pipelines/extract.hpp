// The CLS feature stage (scDINO's compute_CLS_features): embeds every held-out image with a trained ViT
// and writes `{run_dir}/CLS_features/features.h5` (format: pcdino/pipelines/features.hpp) plus the
// workshop's CSV exports. MPI-launched: each rank embeds its shard, rank 0 gathers and writes.
#pragma once

#include <cstddef>
#include <string>

#include "pcdino/core/config.hpp"

namespace pcdino {
class MpiWorld;
}

namespace pcdino::pipelines {

struct ExtractOptions {
  std::string checkpoint;       ///< "" = {run_dir}/scDINO_ViTs/{dino_vit_name}/checkpoint.pth
  bool random_init = false;     ///< embed with a randomly initialised ViT of train_scDINO's arch (a baseline)
  bool raw_pixels = false;      ///< no model: the normalised pixels are the features (a baseline)
  int threads = 0;              ///< LibTorch intra-op threads per rank (0: LibTorch's default)
  int loader_threads = 0;       ///< decoding threads per rank; 0 = compute_cls_features.num_workers
  std::string output;           ///< "" = {run_dir}/CLS_features/features.h5
  bool write_csv = true;        ///< also the workshop's CSV files beside the HDF5 file
  std::string device = "auto";  ///< auto, cpu, cuda (the GPU of this local rank), cuda:N
};

struct ExtractReport {
  std::size_t images = 0;        ///< embedded by all ranks
  std::size_t dim = 0;           ///< feature dimension D
  double images_per_second = 0;  ///< all ranks, reading + forward
  std::string output;            ///< the features file (rank 0)
  std::string checkpoint;        ///< weights used ("" for random_init)
  int epoch = -1;                ///< epochs the checkpoint had finished
};

/// Runs the stage on this rank. The ViT is built from the checkpoint's shapes (embedding width and input
/// channels from patch_embed.proj.weight [D, C, p, p], depth from the blocks, image size from pos_embed,
/// heads from its args' arch or the preset with that width) and loaded from the
/// downstream_analyses.compute_cls_features.checkpoint_key state dict ("module." and "backbone."
/// stripped). Images: meta's channel selection and centre crop, resized (bilinear) to resize_length when
/// `resize`, normalised per channel with the run's mean_and_std_of_dataset.txt; features L2-normalised
/// when `normalize`. Throws NoInputError (checkpoint, mean/std file, dataset), DataError naming the
/// checkpoint and the mismatch (another architecture, another channel count than the images or the
/// mean/std file), DataError for an empty held-out split.
ExtractReport run_extract_stage(const PipelineConfig& config, const MpiWorld& world,
                                const ExtractOptions& options);

}  // namespace pcdino::pipelines
