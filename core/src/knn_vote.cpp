#include "pcdino/core/knn_vote.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace pcdino {

KnnVote weighted_vote(const KnnNeighbours& n, int k, double temperature, const std::vector<int>& bank_labels,
                      const std::vector<int>& query_labels, int num_classes) {
  if (k < 1 || static_cast<std::size_t>(k) > n.kmax)
    throw std::invalid_argument("k = " + std::to_string(k) + " is not in [1, " + std::to_string(n.kmax) +
                                "]");
  if (!(temperature > 0)) throw std::invalid_argument("temperature must be > 0");
  if (query_labels.size() != n.queries || n.similarity.size() != n.queries * n.kmax ||
      n.index.size() != n.queries * n.kmax)
    throw std::invalid_argument("neighbour and query counts differ");
  KnnVote vote;
  vote.predictions.resize(n.queries);
  long hits1 = 0, hits2 = 0, hits5 = 0;
  std::vector<double> votes(static_cast<std::size_t>(num_classes));
  std::vector<int> order(static_cast<std::size_t>(num_classes));
  for (std::size_t i = 0; i < n.queries; ++i) {
    std::fill(votes.begin(), votes.end(), 0.0);
    for (int j = 0; j < k; ++j) {
      const std::size_t at = i * n.kmax + static_cast<std::size_t>(j);
      if (n.index[at] < 0) continue;  // fewer than k neighbours found
      votes[static_cast<std::size_t>(bank_labels.at(static_cast<std::size_t>(n.index[at])))] +=
          std::exp(static_cast<double>(n.similarity[at]) / temperature);
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return votes[static_cast<std::size_t>(x)] > votes[static_cast<std::size_t>(y)];
    });
    vote.predictions[i] = order[0];
    const int target = query_labels[i];
    const auto hit_within = [&](int m) {
      const int ranks = std::min({m, k, num_classes});
      for (int r = 0; r < ranks; ++r) {
        if (order[static_cast<std::size_t>(r)] == target) return true;
      }
      return false;
    };
    hits1 += hit_within(1), hits2 += hit_within(2), hits5 += hit_within(5);
  }
  const double queries = static_cast<double>(n.queries);
  vote.top1 = 100.0 * static_cast<double>(hits1) / queries;
  vote.top2 = 100.0 * static_cast<double>(hits2) / queries;
  vote.top5 = 100.0 * static_cast<double>(hits5) / queries;
  return vote;
}

}  // namespace pcdino
