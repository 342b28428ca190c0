#include "pcdino/pipelines/umap.hpp"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/VectorTransform.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>

#include "faiss_id.hpp"

namespace pcdino::pipelines {

namespace {

void check_graph_request(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                         const std::string& metric) {
  if (metric != "euclidean" && metric != "cosine") {
    throw std::invalid_argument("metric '" + metric + "' (euclidean or cosine)");
  }
  if (x.size() != n * dim || dim == 0) throw std::invalid_argument("features are not [n, dim]");
  if (k < 2 || static_cast<std::size_t>(k) > n) {
    throw std::invalid_argument("n_neighbors " + std::to_string(k) + " needs 2 <= k <= the " +
                                std::to_string(n) + " points");
  }
}

// Rows scaled to unit length (zero rows stay zero): cosine similarity as an inner product.
std::vector<float> unit_rows(const std::vector<float>& x, std::size_t n, std::size_t dim) {
  std::vector<float> unit(x);
  for (std::size_t i = 0; i < n; ++i) {
    float norm = 0;
    for (std::size_t j = 0; j < dim; ++j) norm += unit[i * dim + j] * unit[i * dim + j];
    norm = std::sqrt(norm);
    if (norm > 0)
      for (std::size_t j = 0; j < dim; ++j) unit[i * dim + j] /= norm;
  }
  return unit;
}

// The index's k results per row as the graph: distances from faiss's squared L2 or inner products, each
// point first in its own row at distance 0.
KnnGraph finish_graph(KnnGraph g, bool cosine) {
  for (float& v : g.distances) v = cosine ? std::max(0.0F, 1.0F - v) : std::sqrt(std::max(v, 0.0F));
  const std::size_t n = g.n;
  // faiss computes |x|^2 + |y|^2 - 2 x.y, so a point's distance to itself comes out as rounding noise,
  // and among duplicates it may not come first: put every point first in its own row at distance 0.
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t* idx = &g.indices[i * g.k];
    float* dist = &g.distances[i * g.k];
    std::size_t self = g.k - 1;  // not found: the farthest neighbour makes room
    for (std::size_t j = 0; j < g.k; ++j) {
      if (idx[j] == static_cast<std::int64_t>(i)) {
        self = j;
        break;
      }
    }
    for (std::size_t j = self; j > 0; --j) idx[j] = idx[j - 1], dist[j] = dist[j - 1];
    idx[0] = static_cast<std::int64_t>(i);
    dist[0] = 0.0F;
  }
  return g;
}

// Searches every row of `points` in `index` (built over them) for its k nearest.
KnnGraph search_all(const faiss::Index& index, const std::vector<float>& points, std::size_t n, int k,
                    bool cosine) {
  KnnGraph g;
  g.n = n, g.k = static_cast<std::size_t>(k);
  g.indices.resize(n * g.k);
  g.distances.resize(n * g.k);
  std::vector<FaissId> ids(n * g.k);
  index.search(static_cast<FaissId>(n), points.data(), k, g.distances.data(), ids.data());
  for (std::size_t e = 0; e < ids.size(); ++e) g.indices[e] = ids[e];
  return finish_graph(std::move(g), cosine);
}

}  // namespace

KnnGraph exact_knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                         const std::string& metric) {
  check_graph_request(x, n, dim, k, metric);
  const auto d = static_cast<FaissId>(dim);
  if (metric == "euclidean") {
    faiss::IndexFlatL2 index(d);
    index.add(static_cast<FaissId>(n), x.data());
    return search_all(index, x, n, k, false);
  }
  const std::vector<float> unit = unit_rows(x, n, dim);
  faiss::IndexFlatIP index(d);
  index.add(static_cast<FaissId>(n), unit.data());
  return search_all(index, unit, n, k, true);
}

KnnGraph approximate_knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                               const std::string& metric) {
  check_graph_request(x, n, dim, k, metric);
  const bool cosine = metric == "cosine";
  const std::vector<float> points = cosine ? unit_rows(x, n, dim) : x;
  faiss::IndexHNSWFlat index(static_cast<int>(dim), kHnswLinks,
                             cosine ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2);
  index.hnsw.efConstruction = kHnswBuildBeam;
  index.hnsw.efSearch = std::max(kHnswSearchBeam, 2 * k);
  {
    // One thread while the graph is built: its links depend on the order points arrive in, and faiss
    // inserts them in parallel otherwise. The searches that follow are each deterministic.
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    index.add(static_cast<FaissId>(n), points.data());
    omp_set_num_threads(threads);
  }
  KnnGraph g = search_all(index, points, n, k, cosine);
  // A search that found fewer than k (faiss's id -1: not seen with a beam of 2k, but possible in a
  // badly connected graph) falls back to the exact graph rather than leave a hole.
  if (std::any_of(g.indices.begin(), g.indices.end(), [](std::int64_t id) { return id < 0; }))
    return exact_knn_graph(x, n, dim, k, metric);
  return g;
}

KnnGraph knn_graph(const std::vector<float>& x, std::size_t n, std::size_t dim, int k,
                   const std::string& metric, std::size_t exact_max_points) {
  return n <= exact_max_points ? exact_knn_graph(x, n, dim, k, metric)
                               : approximate_knn_graph(x, n, dim, k, metric);
}

UmapGraph fuzzy_simplicial_set(const KnnGraph& knn, std::vector<float>* rhos_out,
                               std::vector<float>* sigmas_out) {
  const std::size_t n = knn.n, k = knn.k;
  const double target = std::log2(static_cast<double>(k));
  double mean_all = 0;
  for (float v : knn.distances) mean_all += v;
  mean_all /= static_cast<double>(std::max<std::size_t>(knn.distances.size(), 1));

  std::vector<float> rho(n, 0), sigma(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const float* dist = &knn.distances[i * k];
    for (std::size_t j = 0; j < k; ++j) {  // local_connectivity 1: the nearest non-zero distance
      if (dist[j] > 0) {
        rho[i] = dist[j];
        break;
      }
    }
    // Bisection on sigma so that the memberships of the other k - 1 neighbours sum to log2(k).
    double lo = 0, hi = std::numeric_limits<double>::infinity(), mid = 1;
    for (int iter = 0; iter < 64; ++iter) {
      double psum = 0;
      for (std::size_t j = 1; j < k; ++j) {
        const double d = dist[j] - rho[i];
        psum += d > 0 ? std::exp(-d / mid) : 1.0;
      }
      if (std::fabs(psum - target) < 1e-5) break;
      if (psum > target) {
        hi = mid;
        mid = (lo + hi) / 2;
      } else {
        lo = mid;
        mid = std::isinf(hi) ? mid * 2 : (lo + hi) / 2;
      }
    }
    // A floor against vanishing scales (umap-learn's MIN_K_DIST_SCALE).
    double mean_i = 0;
    for (std::size_t j = 0; j < k; ++j) mean_i += dist[j];
    mean_i /= static_cast<double>(k);
    const double floor = 1e-3 * (rho[i] > 0 ? mean_i : mean_all);
    sigma[i] = static_cast<float>(std::max(mid, floor));
  }

  // Directed memberships, then the fuzzy union of A and its transpose.
  std::map<std::pair<int, int>, float> directed;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      const auto other = knn.indices[i * k + j];
      if (other < 0 || static_cast<std::size_t>(other) == i) continue;
      const double d = knn.distances[i * k + j] - rho[i];
      const float w = d <= 0 || sigma[i] == 0 ? 1.0F : static_cast<float>(std::exp(-d / sigma[i]));
      directed[{static_cast<int>(i), static_cast<int>(other)}] = w;
    }
  }
  UmapGraph g;
  for (const auto& [edge, w] : directed) {
    const auto back = directed.find({edge.second, edge.first});
    const float wt = back == directed.end() ? 0.0F : back->second;
    const float sym = w + wt - w * wt;
    // Each undirected edge once per direction: (i, j) here, and (j, i) when A has no j -> i entry.
    g.head.push_back(edge.first), g.tail.push_back(edge.second), g.weight.push_back(sym);
    if (back == directed.end())
      g.head.push_back(edge.second), g.tail.push_back(edge.first), g.weight.push_back(sym);
  }
  if (rhos_out) *rhos_out = rho;
  if (sigmas_out) *sigmas_out = sigma;
  return g;
}

std::pair<double, double> find_ab_params(double spread, double min_dist) {
  constexpr int kPoints = 300;
  std::vector<double> xs(kPoints), ys(kPoints);
  for (int i = 0; i < kPoints; ++i) {
    xs[i] = 3.0 * spread * i / (kPoints - 1);
    ys[i] = xs[i] < min_dist ? 1.0 : std::exp(-(xs[i] - min_dist) / spread);
  }
  const auto sse = [&](double a, double b) {
    double s = 0;
    for (int i = 0; i < kPoints; ++i) {
      const double r = 1.0 / (1.0 + a * std::pow(xs[i], 2 * b)) - ys[i];
      s += r * r;
    }
    return s;
  };
  // Levenberg-Marquardt from (1, 1), as scipy's curve_fit.
  double a = 1, b = 1, lambda = 1e-3, err = sse(a, b);
  for (int iter = 0; iter < 500; ++iter) {
    double jaa = 0, jab = 0, jbb = 0, ga = 0, gb = 0;
    for (int i = 0; i < kPoints; ++i) {
      const double u = xs[i] > 0 ? std::pow(xs[i], 2 * b) : 0.0;
      const double f = 1.0 / (1.0 + a * u), r = f - ys[i];
      const double da = -u * f * f;
      const double db = xs[i] > 0 ? -a * 2 * std::log(xs[i]) * u * f * f : 0.0;
      jaa += da * da, jab += da * db, jbb += db * db, ga += da * r, gb += db * r;
    }
    bool improved = false;
    while (lambda < 1e12) {
      const double maa = jaa * (1 + lambda), mbb = jbb * (1 + lambda), det = maa * mbb - jab * jab;
      const double step_a = -(mbb * ga - jab * gb) / det, step_b = -(maa * gb - jab * ga) / det;
      const double next = sse(a + step_a, b + step_b);
      if (next < err) {
        const double gain = err - next;
        a += step_a, b += step_b, err = next, lambda = std::max(lambda / 10, 1e-12);
        improved = gain > 1e-15 * std::max(err, 1e-30);
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
  return {a, b};
}

namespace {

// umap-learn's make_epochs_per_sample: an edge of weight w is sampled every max_w / w epochs; edges
// below max_w / epochs are never sampled (and dropped).
std::vector<double> epochs_per_sample(const std::vector<float>& weights, int epochs) {
  const float max_w = *std::max_element(weights.begin(), weights.end());
  std::vector<double> result(weights.size(), -1.0);
  for (std::size_t e = 0; e < weights.size(); ++e) {
    const double samples = epochs * static_cast<double>(weights[e]) / max_w;
    if (samples >= 1.0) result[e] = epochs / samples;
  }
  return result;
}

double clip4(double v) {
  return std::clamp(v, -4.0, 4.0);
}

}  // namespace

std::vector<float> umap_embed(const std::vector<float>& x, std::size_t n, std::size_t dim,
                              const UmapOptions& o) {
  if (o.n_components < 1) throw std::invalid_argument("n_components must be at least 1");
  if (o.epochs < 1) throw std::invalid_argument("epochs must be at least 1");
  const KnnGraph knn = knn_graph(x, n, dim, o.n_neighbors, o.metric);
  const UmapGraph graph = fuzzy_simplicial_set(knn);
  const auto [a, b] = find_ab_params(o.spread, o.min_dist);
  const auto nc = static_cast<std::size_t>(o.n_components);

  // Initial layout: PCA scaled to coordinates within [-10, 10] plus tiny noise (umap-learn's
  // init="pca" with noisy_scale_coords).
  std::mt19937_64 rng(o.random_state);
  std::vector<float> y(n * nc, 0.0F);
  if (dim >= nc && n > nc) {
    faiss::PCAMatrix pca(static_cast<int>(dim), static_cast<int>(nc));
    pca.train(static_cast<FaissId>(n), x.data());
    pca.apply_noalloc(static_cast<FaissId>(n), x.data(), y.data());
  } else {
    std::uniform_real_distribution<float> uniform(-10, 10);
    for (float& v : y) v = uniform(rng);
  }
  float max_abs = 0;
  for (float v : y) max_abs = std::max(max_abs, std::fabs(v));
  std::normal_distribution<float> noise(0.0F, 1e-4F);
  for (float& v : y) v = (max_abs > 0 ? v * 10.0F / max_abs : 0.0F) + noise(rng);

  // SGD over the edges with negative sampling (optimize_layout_euclidean, move_other = true).
  const std::vector<double> every = epochs_per_sample(graph.weight, o.epochs);
  std::vector<double> next_sample(every), every_negative(every.size()), next_negative(every.size());
  for (std::size_t e = 0; e < every.size(); ++e) {
    every_negative[e] = every[e] / o.negative_sample_rate;
    next_negative[e] = every_negative[e];
  }
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  const auto rdist = [&](const float* p, const float* q) {
    double s = 0;
    for (std::size_t d = 0; d < nc; ++d) s += (p[d] - q[d]) * (p[d] - q[d]);
    return s;
  };
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const double alpha = o.learning_rate * (1.0 - static_cast<double>(epoch) / o.epochs);
    for (std::size_t e = 0; e < every.size(); ++e) {
      if (every[e] < 0 || next_sample[e] > epoch) continue;
      const auto j = static_cast<std::size_t>(graph.head[e]), k = static_cast<std::size_t>(graph.tail[e]);
      float* current = &y[j * nc];
      float* other = &y[k * nc];
      const double d2 = rdist(current, other);
      const double attract =
          d2 > 0 ? -2.0 * a * b * std::pow(d2, b - 1.0) / (a * std::pow(d2, b) + 1.0) : 0.0;
      for (std::size_t d = 0; d < nc; ++d) {
        const double grad = clip4(attract * (current[d] - other[d]));
        current[d] += static_cast<float>(grad * alpha);
        other[d] -= static_cast<float>(grad * alpha);
      }
      next_sample[e] += every[e];
      const auto negatives = static_cast<int>((epoch - next_negative[e]) / every_negative[e]);
      for (int p = 0; p < negatives; ++p) {
        const std::size_t r = pick(rng);
        if (r == j) continue;
        other = &y[r * nc];
        const double nd2 = rdist(current, other);
        const double repel = nd2 > 0 ? 2.0 * b / ((0.001 + nd2) * (a * std::pow(nd2, b) + 1.0)) : 0.0;
        if (repel <= 0) continue;
        for (std::size_t d = 0; d < nc; ++d)
          current[d] += static_cast<float>(clip4(repel * (current[d] - other[d])) * alpha);
      }
      next_negative[e] += negatives * every_negative[e];
    }
  }
  return y;
}

}  // namespace pcdino::pipelines
