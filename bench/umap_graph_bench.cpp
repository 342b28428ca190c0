// The UMAP plot's kNN graph (pipelines/umap.hpp) as the held-out set grows: the exact faiss search
// (n^2 dim) against the approximate HNSW graph the plots use from 4096 points on, and the approximate
// graph's recall of the exact neighbours. The points stand in for CLS features: 20 clusters on a
// 16-dimensional latent space, mapped linearly into DIM dimensions with a little noise (features of a
// trained ViT have a low intrinsic dimension; uniform noise in 384 dimensions would be no one's features).
//
//   build/bench/pcdino_umap_graph_bench N [DIM] [--no-exact]
//
// Prints one line: n, dim, exact seconds (or -), approximate seconds, recall (or -).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pcdino/pipelines/umap.hpp"

namespace {

std::vector<float> features(std::size_t n, std::size_t dim) {
  constexpr std::size_t latent = 16, clusters = 20;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> centres(clusters * latent), map(dim * latent), x(n * dim);
  for (float& v : centres) v = 4 * normal(rng);
  for (float& v : map) v = normal(rng) / 4;
  std::vector<float> z(latent);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = i % clusters;
    for (std::size_t l = 0; l < latent; ++l) z[l] = centres[c * latent + l] + normal(rng);
    for (std::size_t d = 0; d < dim; ++d) {
      float v = 0.1F * normal(rng);
      for (std::size_t l = 0; l < latent; ++l) v += map[d * latent + l] * z[l];
      x[i * dim + d] = v;
    }
  }
  return x;
}

double seconds_of(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: %s N [DIM] [--no-exact]\n", argv[0]);
    return argc < 2 ? 64 : 0;
  }
  const auto n = static_cast<std::size_t>(std::atol(argv[1]));
  const std::size_t dim = argc > 2 && argv[2][0] != '-' ? static_cast<std::size_t>(std::atol(argv[2])) : 384;
  const bool exact = std::string(argv[argc - 1]) != "--no-exact";
  const std::vector<float> x = features(n, dim);
  const int k = 15;  // umap-learn's n_neighbors
  auto start = std::chrono::steady_clock::now();
  const auto approx = pcdino::pipelines::approximate_knn_graph(x, n, dim, k, "euclidean");
  const double approx_seconds = seconds_of(start);
  if (!exact) {
    std::printf("n %zu dim %zu exact - approximate %.2f recall -\n", n, dim, approx_seconds);
    return 0;
  }
  start = std::chrono::steady_clock::now();
  const auto truth = pcdino::pipelines::exact_knn_graph(x, n, dim, k, "euclidean");
  const double exact_seconds = seconds_of(start);
  std::size_t found = 0, total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 1; j < truth.k; ++j, ++total) {
      for (std::size_t m = 1; m < approx.k; ++m) {
        if (approx.indices[i * approx.k + m] == truth.indices[i * truth.k + j]) {
          ++found;
          break;
        }
      }
    }
  }
  std::printf("n %zu dim %zu exact %.2f approximate %.2f recall %.4f\n", n, dim, exact_seconds,
              approx_seconds, static_cast<double>(found) / static_cast<double>(total));
  return 0;
}
