// Weighted k-nearest-neighbour classification of CLS features, the evaluation of DINO's eval_knn.py
// (knn_classifier, after Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric Instance
// Discrimination", eq. 6): each query's k nearest bank features by cosine similarity s vote for their
// class with weight exp(s / T); classes are ranked by their summed votes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino::pipelines {

/// Accuracy for one k, in percent of the queries.
struct KnnScore {
  int k = 0;
  double temperature = 0;
  double top1 = 0;  ///< the top-ranked class is the query's
  double top2 = 0;  ///< among the first min(2, k) ranked classes (the workshop's "Top2")
  double top5 = 0;  ///< among the first min(5, k) ranked classes (DINO's top-5)
};

struct KnnOptions {
  std::vector<int> ks = {20};  ///< each k: 1 <= k <= bank size
  double temperature = 0.07;   ///< T > 0
  int ivf_lists = 0;    ///< 0: exact search (faiss IndexFlatIP); else an IVF index with this many lists
  int ivf_probes = 16;  ///< lists visited per query with ivf_lists > 0
  int threads = 0;      ///< faiss OpenMP threads (0: its default)
  /// Queries searched and voted at a time: the neighbours held at once are query_block x max k (12 bytes
  /// each: 16384 x 500 is 98 MB), not every query's (a million images' 200,000 held-out queries at the
  /// workshop's largest k, 500: 1.2 GB). The result does not depend on it.
  std::size_t query_block = 16384;
};

struct KnnResult {
  std::vector<KnnScore> scores;               ///< one per k, in the order of options.ks
  std::vector<std::vector<int>> predictions;  ///< [k index][query]: the top-ranked class
};

/// Classifies every query. `bank` is [nb, dim] and `queries` [nq, dim], row-major; rows are
/// L2-normalised here (a copy), so any scale works and similarity is the cosine. Labels are class indices
/// in [0, num_classes). Throws std::invalid_argument for k outside [1, nb], T <= 0, empty inputs or
/// mismatched sizes (callers turn these into messages that name their option or file).
KnnResult weighted_knn(const std::vector<float>& bank, const std::vector<int>& bank_labels,
                       const std::vector<float>& queries, const std::vector<int>& query_labels,
                       std::size_t dim, int num_classes, const KnnOptions& options);

/// confusion[true class][predicted class] counts of `predictions` against `labels`.
std::vector<std::vector<long>> confusion_matrix(const std::vector<int>& labels,
                                                const std::vector<int>& predictions, int num_classes);

/// What the stage did.
struct KnnReport {
  KnnResult result;
  std::size_t bank = 0, queries = 0;
  int best_k = 0;  ///< the k with the highest top-1 (the first such k)
  std::string text_file, json_file;
  double seconds = 0;
  double queries_per_second = 0;  ///< over all k
};

/// The kNN stage: reads `{run_dir}/CLS_features/features.h5`, splits its rows with meta.seed as the
/// workshop does (a numpy permutation; the first 80% are the bank, the rest the queries; one label
/// encoding for both), scores downstream_analyses.kNN.global.n_neighbors at its temperature and writes
/// `{run_dir}/kNN/global_kNN.txt` (the workshop's lines "{k}-NN Top1: {round(top1)}, Top2: {round(top2)}")
/// and `{run_dir}/kNN/knn.json` (every number at full precision, the confusion matrix of the best k).
/// `features_file` overrides the input. Throws NoInputError (no features file), DataError naming the file
/// (too few rows for a bank and queries, a file without labels), ConfigError naming n_neighbors when a k
/// exceeds the bank.
KnnReport run_knn_stage(const PipelineConfig& config, const KnnOptions& search,
                        const std::string& features_file = "");

}  // namespace pcdino::pipelines
