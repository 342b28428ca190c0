#include <gtest/gtest.h>

#include <stdexcept>

#include "pcdino/core/knn_vote.hpp"

namespace pcdino {
namespace {

// Two queries, three neighbours each (bank rows 0..3, classes {0, 1, 1, 2}), by hand:
// query 0: rows 1 (s 0.9), 0 (0.8), 3 (0.1): k=1 votes class 1; k=3 at T=1: class 1 e^0.9, class 0 e^0.8,
//          class 2 e^0.1 -> ranking 1, 0, 2.
// query 1: rows 0 (0.5), 2 (0.5), -1 (none found): k=2 ties classes 0 and 1 -> the lower index ranks first.
TEST(KnnVote, WeightsByExpSimilarityAndBreaksTiesByClassIndex) {
  KnnNeighbours n;
  n.queries = 2;
  n.kmax = 3;
  n.similarity = {0.9f, 0.8f, 0.1f, 0.5f, 0.5f, 0.0f};
  n.index = {1, 0, 3, 0, 2, -1};
  const std::vector<int> bank = {0, 1, 1, 2}, queries = {0, 1};
  const KnnVote one = weighted_vote(n, 1, 1.0, bank, queries, 3);
  EXPECT_EQ(one.predictions, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(one.top1, 0.0);  // query 0 is class 0, ranked second; query 1 is class 1, voted for none
  const KnnVote three = weighted_vote(n, 3, 1.0, bank, queries, 3);
  EXPECT_EQ(three.predictions, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(three.top1, 0.0);
  EXPECT_DOUBLE_EQ(three.top2, 100.0);  // both queries' classes are ranked second
  EXPECT_DOUBLE_EQ(three.top5, 100.0);
  // A low temperature does not change a ranking by similarity, a high one flattens it but keeps the order.
  EXPECT_EQ(weighted_vote(n, 3, 0.01, bank, queries, 3).predictions, three.predictions);
  EXPECT_THROW(weighted_vote(n, 4, 1.0, bank, queries, 3), std::invalid_argument);
  EXPECT_THROW(weighted_vote(n, 1, 0.0, bank, queries, 3), std::invalid_argument);
  EXPECT_THROW(weighted_vote(n, 1, 1.0, bank, {0}, 3), std::invalid_argument);
}

}  // namespace
}  // namespace pcdino
