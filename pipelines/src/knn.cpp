#include "pcdino/pipelines/knn.hpp"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>

#include "faiss_id.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/knn_vote.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/pipelines/features.hpp"

namespace pcdino::pipelines {

namespace fs = std::filesystem;

namespace {

std::vector<float> l2_normalized(const std::vector<float>& x, std::size_t dim) {
  std::vector<float> y(x);
  for (std::size_t r = 0; r * dim < y.size(); ++r) {
    double norm = 0;
    for (std::size_t j = 0; j < dim; ++j) norm += static_cast<double>(y[r * dim + j]) * y[r * dim + j];
    // F.normalize's eps: a zero row stays zero.
    const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (std::size_t j = 0; j < dim; ++j) y[r * dim + j] = static_cast<float>(y[r * dim + j] * scale);
  }
  return y;
}

}  // namespace

KnnResult weighted_knn(const std::vector<float>& bank, const std::vector<int>& bank_labels,
                       const std::vector<float>& queries, const std::vector<int>& query_labels,
                       std::size_t dim, int num_classes, const KnnOptions& options) {
  if (dim == 0 || bank_labels.empty() || query_labels.empty()) {
    throw std::invalid_argument("the bank and the queries must not be empty");
  }
  const std::size_t nb = bank_labels.size(), nq = query_labels.size();
  if (bank.size() != nb * dim || queries.size() != nq * dim) {
    throw std::invalid_argument("feature and label counts differ");
  }
  if (!(options.temperature > 0)) throw std::invalid_argument("temperature must be > 0");
  if (options.ks.empty()) throw std::invalid_argument("no k given");
  for (int k : options.ks) {
    if (k < 1 || static_cast<std::size_t>(k) > nb) {
      throw std::invalid_argument("k = " + std::to_string(k) + " is not in [1, " + std::to_string(nb) +
                                  "] (the bank has " + std::to_string(nb) + " features)");
    }
  }
  for (int l : bank_labels) {
    if (l < 0 || l >= num_classes) throw std::invalid_argument("bank label out of range");
  }
  for (int l : query_labels) {
    if (l < 0 || l >= num_classes) throw std::invalid_argument("query label out of range");
  }
  if (options.threads > 0) omp_set_num_threads(options.threads);

  const auto b = l2_normalized(bank, dim), q = l2_normalized(queries, dim);
  const int kmax = *std::max_element(options.ks.begin(), options.ks.end());
  const auto d = static_cast<FaissId>(dim);
  faiss::IndexFlatIP flat(d);
  std::unique_ptr<faiss::IndexIVFFlat> ivf;
  faiss::Index* index = &flat;
  if (options.ivf_lists > 0) {
    ivf = std::make_unique<faiss::IndexIVFFlat>(&flat, d, static_cast<std::size_t>(options.ivf_lists),
                                                faiss::METRIC_INNER_PRODUCT);
    ivf->train(static_cast<FaissId>(nb), b.data());
    ivf->nprobe = static_cast<std::size_t>(std::max(1, options.ivf_probes));
    index = ivf.get();
  }
  index->add(static_cast<FaissId>(nb), b.data());
  // Search and vote a block of queries at a time; the votes' percentages are counts over the block, which
  // add up to the whole's.
  const std::size_t block = std::max<std::size_t>(1, options.query_block);
  std::vector<double> hits(options.ks.size() * 3, 0.0);
  KnnResult result;
  result.predictions.assign(options.ks.size(), {});
  KnnNeighbours neighbours;
  std::vector<FaissId> ids;
  for (std::size_t first = 0; first < nq; first += block) {
    const std::size_t count = std::min(block, nq - first);
    neighbours.queries = count;
    neighbours.kmax = static_cast<std::size_t>(kmax);
    neighbours.similarity.resize(count * neighbours.kmax);
    ids.resize(count * neighbours.kmax);
    // Results come sorted by decreasing similarity, so the k nearest are the first k of the kmax nearest.
    index->search(static_cast<FaissId>(count), q.data() + first * dim, kmax, neighbours.similarity.data(),
                  ids.data());
    neighbours.index.assign(ids.begin(), ids.end());
    const std::vector<int> labels(query_labels.begin() + static_cast<std::ptrdiff_t>(first),
                                  query_labels.begin() + static_cast<std::ptrdiff_t>(first + count));
    for (std::size_t i = 0; i < options.ks.size(); ++i) {
      KnnVote vote =
          weighted_vote(neighbours, options.ks[i], options.temperature, bank_labels, labels, num_classes);
      const double share = static_cast<double>(count) / 100.0;  // percent of the block -> queries
      hits[3 * i] += std::round(vote.top1 * share), hits[3 * i + 1] += std::round(vote.top2 * share);
      hits[3 * i + 2] += std::round(vote.top5 * share);
      result.predictions[i].insert(result.predictions[i].end(), vote.predictions.begin(),
                                   vote.predictions.end());
    }
  }
  const auto percent = [nq](double count) { return 100.0 * count / static_cast<double>(nq); };
  for (std::size_t i = 0; i < options.ks.size(); ++i) {
    result.scores.push_back({options.ks[i], options.temperature, percent(hits[3 * i]),
                             percent(hits[3 * i + 1]), percent(hits[3 * i + 2])});
  }
  return result;
}

std::vector<std::vector<long>> confusion_matrix(const std::vector<int>& labels,
                                                const std::vector<int>& predictions, int num_classes) {
  std::vector<std::vector<long>> m(static_cast<std::size_t>(num_classes),
                                   std::vector<long>(static_cast<std::size_t>(num_classes), 0));
  for (std::size_t i = 0; i < labels.size() && i < predictions.size(); ++i) {
    ++m[static_cast<std::size_t>(labels[i])][static_cast<std::size_t>(predictions[i])];
  }
  return m;
}

KnnReport run_knn_stage(const PipelineConfig& config, const KnnOptions& search,
                        const std::string& features_file) {
  const auto start = std::chrono::steady_clock::now();
  const RunLayout layout(config);
  const std::string input = features_file.empty() ? layout.features : features_file;
  const FeatureSet set = read_features(input);
  const std::size_t n = set.rows;
  // The workshop's split: np.random.seed(seed); np.random.shuffle(indices); the first int(0.8 N) are the
  // bank.
  const std::size_t nb = static_cast<std::size_t>(static_cast<double>(n) * 0.8);
  if (nb == 0 || nb == n) {
    throw DataError(
        input + ": " + std::to_string(n) +
        " feature rows are too few to split into a bank (80%) and queries (20%); the held-out "
        "split (1 - meta.train_datasetsplit_fraction of the dataset) must hold at least 5 images");
  }
  const auto perm = numpy_permutation(n, config.meta.seed);
  std::vector<float> bank, queries;
  std::vector<int> bank_labels, query_labels;
  bank.reserve(nb * set.dim);
  queries.reserve((n - nb) * set.dim);
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t row = perm[r];
    auto& dst = r < nb ? bank : queries;
    dst.insert(dst.end(), set.features.begin() + static_cast<std::ptrdiff_t>(row * set.dim),
               set.features.begin() + static_cast<std::ptrdiff_t>((row + 1) * set.dim));
    (r < nb ? bank_labels : query_labels).push_back(set.labels[row]);
  }
  KnnOptions options = search;
  options.ks = config.downstream.knn.n_neighbors;
  options.temperature = config.downstream.knn.temperature;
  for (int k : options.ks) {
    if (k < 1 || static_cast<std::size_t>(k) > nb) {
      throw ConfigError(config.source +
                        ": downstream_analyses.kNN.global.n_neighbors: k = " + std::to_string(k) +
                        " is larger than the bank (" + std::to_string(nb) + " of the " + std::to_string(n) +
                        " feature rows in " + input + "); use k <= " + std::to_string(nb));
    }
  }
  const int num_classes = static_cast<int>(set.class_names.size());

  KnnReport report;
  report.bank = nb;
  report.queries = n - nb;
  const auto search_start = std::chrono::steady_clock::now();
  report.result = weighted_knn(bank, bank_labels, queries, query_labels, set.dim, num_classes, options);
  const double search_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - search_start).count();
  report.queries_per_second = static_cast<double>(report.queries) / std::max(search_seconds, 1e-9);
  std::size_t best = 0;
  for (std::size_t i = 1; i < report.result.scores.size(); ++i) {
    if (report.result.scores[i].top1 > report.result.scores[best].top1) best = i;
  }
  report.best_k = report.result.scores[best].k;

  make_directories(layout.knn_dir);
  std::string text = "Run: " + config.meta.name_of_run + "\n";
  nlohmann::json results = nlohmann::json::array();
  for (const auto& s : report.result.scores) {
    text += std::to_string(s.k) + "-NN Top1: " + std::to_string(std::lround(s.top1)) +
            ", Top2: " + std::to_string(std::lround(s.top2)) + "\n";
    results.push_back(
        {{"k", s.k}, {"T", s.temperature}, {"top1", s.top1}, {"top2", s.top2}, {"top5", s.top5}});
  }
  text += "--------------------------------------------------\n";
  report.text_file = layout.knn_text;
  report.json_file = layout.knn_json;
  nlohmann::json doc = {
      {"run", config.meta.name_of_run},
      {"features_file", input},
      {"checkpoint", set.checkpoint},
      {"checkpoint_key", set.checkpoint_key},
      {"epoch", set.epoch},
      {"seed", config.meta.seed},
      {"temperature", options.temperature},
      {"bank", report.bank},
      {"queries", report.queries},
      {"dim", set.dim},
      {"class_names", set.class_names},
      {"results", results},
      {"best_k", report.best_k},
      {"confusion_matrix",
       {{"k", report.best_k},
        {"rows", "true class"},
        {"columns", "predicted class"},
        {"counts", confusion_matrix(query_labels, report.result.predictions[best], num_classes)}}},
      {"search", options.ivf_lists > 0 ? "faiss IndexIVFFlat" : "faiss IndexFlatIP (exact)"},
      {"queries_per_second", report.queries_per_second}};
  write_file_atomic(report.text_file, text);
  write_file_atomic(report.json_file, doc.dump(2) + "\n");
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace pcdino::pipelines
