// Unit tests of the UMAP used by the plots stage: the curve fit against umap-learn's published values,
// the fuzzy simplicial set's defining properties, and an embedding that keeps well-separated clusters
// apart, deterministically for a random_state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <stdexcept>

#include "pcdino/pipelines/umap.hpp"

namespace pcdino::pipelines {
namespace {

// n points in `dim` dimensions around `clusters` centres 20 apart (unit noise); labels in `labels`.
std::vector<float> blobs(std::size_t n, std::size_t dim, int clusters, std::vector<int>* labels) {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> x(n * dim);
  for (std::size_t i = 0; i < n; ++i) {
    const int c = static_cast<int>(i % static_cast<std::size_t>(clusters));
    labels->push_back(c);
    for (std::size_t d = 0; d < dim; ++d)
      x[i * dim + d] = noise(rng) + (d == static_cast<std::size_t>(c) ? 20.0F : 0.0F);
  }
  return x;
}

TEST(Umap, CurveParametersMatchUmapLearn) {
  // umap.umap_.find_ab_params(1.0, 0.1) = (1.5769434603113077, 0.8950608779109733) in umap-learn 0.5.
  const auto [a, b] = find_ab_params(1.0, 0.1);
  EXPECT_NEAR(a, 1.5769, 2e-3);
  EXPECT_NEAR(b, 0.8951, 2e-3);
}

TEST(Umap, MembershipsSumToLog2KAndTheGraphIsSymmetric) {
  std::vector<int> labels;
  const auto x = blobs(120, 8, 3, &labels);
  const int k = 10;
  const KnnGraph knn = exact_knn_graph(x, 120, 8, k, "euclidean");
  for (std::size_t i = 0; i < knn.n; ++i) {
    EXPECT_EQ(knn.indices[i * knn.k], static_cast<std::int64_t>(i)) << "each point is its own nearest";
    EXPECT_FLOAT_EQ(knn.distances[i * knn.k], 0.0F);
  }
  std::vector<float> rho, sigma;
  const UmapGraph g = fuzzy_simplicial_set(knn, &rho, &sigma);
  for (std::size_t i = 0; i < knn.n; ++i) {
    double sum = 0;
    for (std::size_t j = 1; j < knn.k; ++j)
      sum += std::exp(-std::max(0.0, knn.distances[i * knn.k + j] - double(rho[i])) / sigma[i]);
    EXPECT_NEAR(sum, std::log2(double(k)), 1e-3) << "point " << i;
    EXPECT_FLOAT_EQ(rho[i], knn.distances[i * knn.k + 1]) << "rho is the distance to the nearest other point";
  }
  std::map<std::pair<int, int>, float> w;
  for (std::size_t e = 0; e < g.head.size(); ++e) {
    EXPECT_GT(g.weight[e], 0.0F);
    EXPECT_LE(g.weight[e], 1.0F);
    EXPECT_TRUE(w.emplace(std::make_pair(g.head[e], g.tail[e]), g.weight[e]).second) << "edges are unique";
  }
  for (const auto& [edge, weight] : w) {
    const auto back = w.find({edge.second, edge.first});
    ASSERT_NE(back, w.end());
    EXPECT_FLOAT_EQ(back->second, weight);
  }
}

TEST(Umap, SeparatesClustersDeterministically) {
  std::vector<int> labels;
  const std::size_t n = 300, dim = 16;
  const auto x = blobs(n, dim, 4, &labels);
  UmapOptions o;
  o.n_neighbors = 15, o.epochs = 100, o.random_state = 3;
  const auto y = umap_embed(x, n, dim, o);
  ASSERT_EQ(y.size(), n * 2);
  // Leave-one-out 1-NN in the embedding recovers the clusters.
  int correct = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double best = 1e300;
    int label = -1;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const double d = std::hypot(y[2 * i] - y[2 * j], y[2 * i + 1] - y[2 * j + 1]);
      if (d < best) best = d, label = labels[j];
    }
    correct += label == labels[i];
  }
  EXPECT_EQ(correct, static_cast<int>(n));
  EXPECT_EQ(umap_embed(x, n, dim, o), y) << "the same random_state gives the same layout";
  o.random_state = 4;
  EXPECT_NE(umap_embed(x, n, dim, o), y);
}

// The share of each row's k - 1 exact neighbours (itself left out) that `approx` found too.
double recall(const KnnGraph& exact, const KnnGraph& approx) {
  std::size_t found = 0, total = 0;
  for (std::size_t i = 0; i < exact.n; ++i) {
    for (std::size_t j = 1; j < exact.k; ++j, ++total) {
      const std::int64_t want = exact.indices[i * exact.k + j];
      for (std::size_t m = 1; m < approx.k; ++m) {
        if (approx.indices[i * approx.k + m] == want) {
          ++found;
          break;
        }
      }
    }
  }
  return static_cast<double>(found) / static_cast<double>(total);
}

TEST(Umap, TheApproximateGraphFindsTheExactNeighbours) {
  std::vector<int> labels;
  const std::size_t n = 5000, dim = 24;
  const auto x = blobs(n, dim, 6, &labels);
  for (const std::string metric : {"euclidean", "cosine"}) {
    const KnnGraph exact = exact_knn_graph(x, n, dim, 15, metric);
    const KnnGraph approx = approximate_knn_graph(x, n, dim, 15, metric);
    ASSERT_EQ(approx.indices.size(), exact.indices.size());
    const double r = recall(exact, approx);
    EXPECT_GE(r, 0.95) << metric;
    std::printf("%s: recall %.4f of the exact graph's neighbours (%zu points, %zu dims, k 15)\n",
                metric.c_str(), r, n, dim);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(approx.indices[i * approx.k], static_cast<std::int64_t>(i));
      for (std::size_t j = 1; j < approx.k; ++j)
        ASSERT_LE(approx.distances[i * approx.k + j - 1], approx.distances[i * approx.k + j]) << i;
    }
    const KnnGraph again = approximate_knn_graph(x, n, dim, 15, metric);
    EXPECT_EQ(again.indices, approx.indices) << "the same input gives the same graph";
  }
  // umap_embed's graph: exact up to the limit, approximate from one more point on.
  EXPECT_EQ(knn_graph(x, n, dim, 15, "euclidean").indices,
            exact_knn_graph(x, n, dim, 15, "euclidean").indices)
      << "5000 points are under kExactGraphMaxPoints";
  EXPECT_EQ(knn_graph(x, n, dim, 15, "euclidean", n).indices,
            exact_knn_graph(x, n, dim, 15, "euclidean").indices);
  EXPECT_EQ(knn_graph(x, n, dim, 15, "euclidean", n - 1).indices,
            approximate_knn_graph(x, n, dim, 15, "euclidean").indices);
}

TEST(Umap, BadArgumentsAreRefused) {
  std::vector<int> labels;
  const auto x = blobs(20, 4, 2, &labels);
  EXPECT_THROW(exact_knn_graph(x, 20, 4, 21, "euclidean"), std::invalid_argument);
  EXPECT_THROW(exact_knn_graph(x, 20, 4, 5, "manhattan"), std::invalid_argument);
  EXPECT_THROW(exact_knn_graph(x, 19, 4, 5, "cosine"), std::invalid_argument);
  const KnnGraph cosine = exact_knn_graph(x, 20, 4, 5, "cosine");
  for (float d : cosine.distances) EXPECT_GE(d, 0.0F);
}

}  // namespace
}  // namespace pcdino::pipelines
