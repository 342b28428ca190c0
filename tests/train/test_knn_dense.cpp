// The faiss-based weighted kNN against a straightforward dense implementation in LibTorch (matmul, topk,
// one-hot votes, sort), as DINO's eval_knn.knn_classifier computes it, on 10,000 random features.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pcdino/pipelines/knn.hpp"

namespace pcdino {
namespace {

struct Dense {
  double top1 = 0, top5 = 0;
};

Dense dense_knn(const torch::Tensor& bank, const torch::Tensor& bank_labels, const torch::Tensor& queries,
                const torch::Tensor& query_labels, int k, double T, int num_classes) {
  const auto b = torch::nn::functional::normalize(bank, torch::nn::functional::NormalizeFuncOptions().dim(1));
  const auto q =
      torch::nn::functional::normalize(queries, torch::nn::functional::NormalizeFuncOptions().dim(1));
  const auto sim = q.matmul(b.t());                     // [nq, nb]
  const auto [dist, idx] = sim.topk(k, 1, true, true);  // [nq, k]
  const auto neighbours = bank_labels.index_select(0, idx.reshape(-1)).view({-1, k});
  const auto one_hot = torch::zeros({q.size(0), k, num_classes}).scatter_(2, neighbours.unsqueeze(2), 1.0);
  const auto probs = (one_hot * dist.div(T).exp().unsqueeze(2)).sum(1);  // [nq, classes]
  const auto order = std::get<1>(probs.sort(1, true));
  const auto correct = order.eq(query_labels.view({-1, 1}));
  Dense d;
  const double n = static_cast<double>(q.size(0));
  d.top1 = 100.0 * correct.narrow(1, 0, 1).sum().item<double>() / n;
  d.top5 = 100.0 * correct.narrow(1, 0, std::min(5, k)).sum().item<double>() / n;
  return d;
}

TEST(WeightedKnnDense, SameAccuracyAsLibTorchOn10kRandomFeatures) {
  torch::manual_seed(11);
  const int classes = 10, dim = 32;
  // Class-dependent means so that accuracies are far from both 0 and 100.
  const auto centres = torch::randn({classes, dim});
  const auto labels = torch::randint(classes, {10000}, torch::kLong);
  const auto features = centres.index_select(0, labels) * 0.6 + torch::randn({10000, dim});
  const auto bank = features.slice(0, 0, 8000), queries = features.slice(0, 8000);
  const auto bank_labels = labels.slice(0, 0, 8000), query_labels = labels.slice(0, 8000);
  const auto to_floats = [](const torch::Tensor& t) {
    const auto c = t.contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  };
  const auto to_ints = [](const torch::Tensor& t) {
    const auto c = t.to(torch::kInt).contiguous();
    return std::vector<int>(c.data_ptr<int>(), c.data_ptr<int>() + c.numel());
  };
  pipelines::KnnOptions o;
  o.ks = {1, 5, 20, 100, 200};
  o.temperature = 0.07;
  const auto r = pipelines::weighted_knn(to_floats(bank), to_ints(bank_labels), to_floats(queries),
                                         to_ints(query_labels), dim, classes, o);
  for (std::size_t i = 0; i < o.ks.size(); ++i) {
    const Dense d = dense_knn(bank, bank_labels, queries, query_labels, o.ks[i], o.temperature, classes);
    SCOPED_TRACE("k = " + std::to_string(o.ks[i]));
    EXPECT_DOUBLE_EQ(r.scores[i].top1, d.top1);
    EXPECT_DOUBLE_EQ(r.scores[i].top5, d.top5);
    EXPECT_GT(d.top1, 20.0);
    EXPECT_LT(d.top1, 95.0);
  }
}

}  // namespace
}  // namespace pcdino
