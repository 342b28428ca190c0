// The weighted vote of DINO's k-nearest-neighbour evaluation (facebookresearch/dino eval_knn.py,
// knn_classifier, after Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric Instance
// Discrimination", eq. 6): each query's k nearest bank features, by cosine similarity s, vote for their class
// with weight exp(s / T); classes are ranked by their summed votes. How the neighbours are found is the
// caller's: faiss for the kNN stage (pipelines/), torch::mm and topk for the trainer's online kNN (train/).
#pragma once

#include <cstddef>
#include <vector>

namespace pcdino {

/// Each query's nearest bank rows: [queries, kmax] row-major, each row by decreasing similarity.
struct KnnNeighbours {
  std::size_t queries = 0;
  std::size_t kmax = 0;
  std::vector<float> similarity;  ///< the cosine similarity of each neighbour
  std::vector<long> index;        ///< its bank row; < 0 where fewer than kmax were found (IVF)
};

/// Accuracy of one vote, in percent of the queries, and each query's top-ranked class.
struct KnnVote {
  double top1 = 0;               ///< the top-ranked class is the query's
  double top2 = 0;               ///< among the first min(2, k) ranked classes (the workshop's "Top2")
  double top5 = 0;               ///< among the first min(5, k) ranked classes (DINO's top-5)
  std::vector<int> predictions;  ///< [query]: the top-ranked class
};

/// Votes with the first `k` neighbours of each query at temperature `temperature`. Classes are ranked by
/// decreasing vote, ties by class index, as DINO sorts them over all classes (classes without votes fill the
/// ranking in index order). `bank_labels` [nb] and `query_labels` [queries] are class indices in
/// [0, num_classes). Throws std::invalid_argument for k outside [1, kmax], T <= 0, or sizes that differ.
KnnVote weighted_vote(const KnnNeighbours& neighbours, int k, double temperature,
                      const std::vector<int>& bank_labels, const std::vector<int>& query_labels,
                      int num_classes);

}  // namespace pcdino
