#include "pcdino/train/online_knn.hpp"

#include <algorithm>
#include <cstring>

#include "pcdino/core/error.hpp"
#include "pcdino/core/knn_vote.hpp"
#include "pcdino/core/split.hpp"

namespace pcdino::train {

namespace F = torch::nn::functional;

OnlineKnn::OnlineKnn(const Dataset& ds, const PipelineConfig& c, const ImageTransform& transform,
                     const MeanStdValues& ms, int images) {
  const auto held_out =
      train_heldout_split(ds.size(), c.meta.train_datasetsplit_fraction, c.meta.seed).held_out;
  const std::size_t n = std::min(held_out.size(), static_cast<std::size_t>(std::max(images, 0)));
  if (n < 2) {
    throw ConfigError(c.source + ": train_scDINO.hyperparameters.online_knn_images: the held-out split has " +
                      std::to_string(held_out.size()) + " image(s); the online kNN needs at least 2");
  }
  const int size = c.train.hyperparameters.global_crops_size;
  std::vector<torch::Tensor> tensors;
  for (std::size_t i = 0; i < n; ++i) {
    const Image img = ds.load(held_out[i], transform);
    auto t = torch::empty({1, img.channels, img.height, img.width});
    std::memcpy(t.data_ptr<float>(), img.data.data(), img.data.size() * sizeof(float));
    if (img.height != size || img.width != size) {
      t = F::interpolate(t, F::InterpolateFuncOptions()
                                .size(std::vector<int64_t>{size, size})
                                .mode(torch::kBicubic)
                                .align_corners(false));
    }
    tensors.push_back(t);
    labels_.push_back(ds.class_index(held_out[i]));
  }
  images_ = torch::cat(tensors, 0);
  const auto mean = torch::tensor(ms.mean, torch::kFloat32).view({1, -1, 1, 1});
  const auto std = torch::tensor(ms.std, torch::kFloat32).view({1, -1, 1, 1});
  images_ = (images_ - mean) / std;
  bank_ = std::clamp<std::size_t>(n * 8 / 10, 1, n - 1);
  classes_ = *std::max_element(labels_.begin(), labels_.end()) + 1;
}

double OnlineKnn::top1(VisionTransformer& backbone, const torch::Device& device) const {
  torch::NoGradGuard no_grad;
  const bool training = backbone->is_training();
  backbone->eval();
  std::vector<torch::Tensor> features;
  for (int64_t start = 0; start < images_.size(0); start += 256) {
    const auto batch = images_.slice(0, start, std::min<int64_t>(start + 256, images_.size(0)));
    features.push_back(backbone->forward(batch.to(device)).to(torch::kCPU, torch::kFloat32));
  }
  backbone->train(training);
  // DINO's knn_classifier: L2-normalised features, similarities by one matrix product, the k nearest by
  // topk; the vote is the kNN stage's (core/knn_vote.hpp).
  const auto all = F::normalize(torch::cat(features, 0), F::NormalizeFuncOptions().p(2).dim(1));
  const auto bank_rows = static_cast<int64_t>(bank_);
  const int64_t k = std::min<int64_t>(kK, bank_rows);
  const auto nearest = all.slice(0, bank_rows).mm(all.slice(0, 0, bank_rows).t()).topk(k, 1, true, true);
  const auto similarity = std::get<0>(nearest).contiguous(), index = std::get<1>(nearest).contiguous();
  KnnNeighbours neighbours;
  neighbours.queries = static_cast<std::size_t>(similarity.size(0));
  neighbours.kmax = static_cast<std::size_t>(k);
  neighbours.similarity.assign(similarity.data_ptr<float>(),
                               similarity.data_ptr<float>() + similarity.numel());
  neighbours.index.assign(index.data_ptr<int64_t>(), index.data_ptr<int64_t>() + index.numel());
  const std::vector<int> bank_labels(labels_.begin(), labels_.begin() + static_cast<std::ptrdiff_t>(bank_));
  const std::vector<int> query_labels(labels_.begin() + static_cast<std::ptrdiff_t>(bank_), labels_.end());
  return weighted_vote(neighbours, static_cast<int>(k), kTemperature, bank_labels, query_labels, classes_)
      .top1;
}

}  // namespace pcdino::train
