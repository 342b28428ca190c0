// The online kNN diagnostic (train_scDINO.hyperparameters.online_knn_every): DINO's weighted kNN
// (eval_knn.py, k 20, T 0.07) on the teacher's CLS features of a fixed held-out subset, while training
// runs, so that a user sees the features improve before the extraction and kNN stages.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/train/vit.hpp"

namespace pcdino::train {

class OnlineKnn {
 public:
  static constexpr int kK = 20;                 ///< eval_knn.py's default nb_knn (the first)
  static constexpr double kTemperature = 0.07;  ///< eval_knn.py's default temperature

  /// Loads the first `images` of the held-out split (meta.seed's split; all of it if smaller), normalised
  /// with the mean/std and resized bicubically to global_crops_size where they differ, into memory
  /// ([N, C, S, S] float32, N * C * S * S * 4 bytes). The first 80% are the bank, the rest the queries
  /// (at least one of each). Throws ConfigError naming online_knn_images if the split holds fewer than
  /// 2 images or the classes number fewer than 2.
  OnlineKnn(const Dataset& dataset, const PipelineConfig& config, const ImageTransform& transform,
            const MeanStdValues& mean_std, int images);

  /// Top-1 accuracy in percent of the queries with `backbone`'s CLS features (eval mode, no gradients,
  /// batches of 256 on `device`); the backbone's training mode is restored.
  double top1(VisionTransformer& backbone, const torch::Device& device) const;

  std::size_t images() const { return labels_.size(); }

 private:
  torch::Tensor images_;  // [N, C, S, S]
  std::vector<int> labels_;
  std::size_t bank_ = 0;
  int classes_ = 0;
};

}  // namespace pcdino::train
