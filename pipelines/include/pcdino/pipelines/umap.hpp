// UMAP (McInnes, Healy & Melville 2018, "UMAP: Uniform Manifold Approximation and Projection for Dimension
// Reduction", arXiv:1802.03426) for the plots stage: the 2-D embedding of the CLS features that scDINO
// draws with umap-learn. No C++ UMAP is packaged in Debian, so this follows umap-learn 0.5's algorithm
// (umap_.py: smooth_knn_dist, compute_membership_strengths, fuzzy_simplicial_set, find_ab_params,
// make_epochs_per_sample; layouts.py: optimize_layout_euclidean) on a faiss kNN graph, exact up to 200,000
// points and approximate (HNSW) beyond, with two documented differences: the initial layout is PCA
// (umap-learn's init="pca") instead of the spectral embedding, which needs a sparse eigensolver, and the
// graph is exact up to 200,000 points where umap-learn computes it exactly only below 4096 (faiss's exact
// search on BLAS is faster than a deterministic approximate one below about 100,000 points:
// bench/RESULTS.md). Deterministic for a random_state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pcdino::pipelines {

struct UmapOptions {
  int n_neighbors = 15;              ///< k of the kNN graph, the point itself included (umap-learn's)
  double min_dist = 0.1;             ///< closest distance of neighbours in the embedding
  double spread = 1.0;               ///< scale of the embedded points
  int n_components = 2;              ///< embedding dimension
  std::string metric = "euclidean";  ///< "euclidean" or "cosine" (1 - cosine similarity)
  int epochs = 200;                  ///< optimisation epochs (umap-learn: 200 above 10,000 points)
  std::uint64_t random_state = 42;   ///< seeds the initial noise and the negative samples
  int negative_sample_rate = 5;      ///< repulsive samples per attractive one
  double learning_rate = 1.0;        ///< initial alpha, decayed linearly to 0
};

/// The n_neighbors nearest neighbours of every row by exact faiss search: indices and distances
/// ([n, k] row-major, ascending; Euclidean distance or 1 - cosine similarity). Throws
/// std::invalid_argument for k > n, k < 2, an unknown metric or mismatched sizes.
struct KnnGraph {
  std::size_t n = 0, k = 0;
  std::vector<std::int64_t> indices;
  std::vector<float> distances;
};
KnnGraph exact_knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                         const std::string& metric);

/// Up to this many points the graph is exact; beyond, approximate. An exact graph costs n^2 dim
/// multiply-adds, which faiss does on BLAS over every core; the approximate one is built on one thread (so
/// that it is deterministic). On 2 cores with 384-dim features the two cost the same near 100,000 points
/// (113,576: 100 s exact, 82 s approximate; bench/RESULTS.md); on a node with more cores the exact graph
/// stays ahead longer. umap-learn 0.5 (umap/umap_.py, UMAP.fit) turns to NN-descent at 4096 points, its
/// pairwise distances being unblocked NumPy/numba rather than BLAS.
inline constexpr std::size_t kExactGraphMaxPoints = 200000;
/// The approximate graph's HNSW index (faiss IndexHNSWFlat): links per point (M), the beam while building
/// (efConstruction) and while searching (efSearch, at least 2k); faiss's defaults but the search beam.
/// Recall of the exact neighbours: tested (Umap.TheApproximateGraphFindsTheExactNeighbours, >= 0.95) and
/// measured in bench/RESULTS.md (0.993 at 113,576 points).
inline constexpr int kHnswLinks = 16;
inline constexpr int kHnswBuildBeam = 40;
inline constexpr int kHnswSearchBeam = 64;

/// exact_knn_graph()'s result from a faiss HNSW index instead of an exhaustive search: each row's k
/// approximate nearest neighbours (the point itself first), built on one thread so that the same input
/// gives the same graph. Throws as exact_knn_graph().
KnnGraph approximate_knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                               const std::string& metric);

/// The graph umap_embed() uses: exact_knn_graph() up to `exact_max_points` points, else
/// approximate_knn_graph().
KnnGraph knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                   const std::string& metric, std::size_t exact_max_points = kExactGraphMaxPoints);

/// The fuzzy simplicial set as a symmetric sparse graph in coordinate form, both directions of every
/// edge: w_ij = exp(-max(0, d_ij - rho_i) / sigma_i) with rho_i the distance to the nearest other point
/// and sigma_i found by bisection so that sum_j w_ij = log2(k) (umap-learn's smooth_knn_dist), then the
/// fuzzy union W = A + A^T - A o A^T. `rhos` and `sigmas` (optional) receive the per-point values.
struct UmapGraph {
  std::vector<int> head, tail;  ///< edge e goes head[e] -> tail[e]
  std::vector<float> weight;    ///< in (0, 1]
};
UmapGraph fuzzy_simplicial_set(const KnnGraph& knn, std::vector<float>* rhos = nullptr,
                               std::vector<float>* sigmas = nullptr);

/// a, b of the embedding's membership curve 1 / (1 + a d^(2b)), least-squares fitted to 1 for
/// d < min_dist and exp(-(d - min_dist) / spread) beyond, on 300 points of [0, 3 spread] (umap-learn's
/// find_ab_params; min_dist 0.1, spread 1 gives a = 1.577, b = 0.895).
std::pair<double, double> find_ab_params(double spread, double min_dist);

/// Embeds the rows of `x` ([n, dim], row-major): [n, n_components] row-major. Throws
/// std::invalid_argument as exact_knn_graph, or for n_components < 1 or epochs < 1.
std::vector<float> umap_embed(const std::vector<float>& x, std::size_t n, std::size_t dim,
                              const UmapOptions& options);

}  // namespace pcdino::pipelines
