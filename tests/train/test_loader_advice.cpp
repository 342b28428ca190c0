// The loader's advice at an epoch's end: the share of the step spent waiting and the threads that would
// feed it.
#include <gtest/gtest.h>

#include <cmath>

#include "pcdino/train/loader_advice.hpp"

namespace pcdino::train {
namespace {

TEST(LoaderAdvice, AStepThatWaitsIsToldTheThreadsThatWouldFeedIt) {
  // 0.05 s waiting of a 0.25 s step; a thread makes a batch in 0.9 s, the step eats one per 0.2 s.
  const LoaderAdvice starved = advise_loader(0.05, 0.20, 0.9);
  EXPECT_DOUBLE_EQ(starved.wait_share, 0.2);
  EXPECT_TRUE(starved.warn);
  EXPECT_EQ(starved.threads_needed, 5);
  EXPECT_EQ(advise_loader(0.05, 0.20, 0.4).threads_needed, 2) << "exactly two batches' time: two threads";
  EXPECT_EQ(advise_loader(0.05, 0.20, 0.01).threads_needed, 1);
}

TEST(LoaderAdvice, AFedStepIsNotWarnedAndBadFiguresSayNothing) {
  const LoaderAdvice fed = advise_loader(0.01, 0.20, 0.5);
  EXPECT_NEAR(fed.wait_share, 0.01 / 0.21, 1e-12);
  EXPECT_FALSE(fed.warn);
  EXPECT_FALSE(advise_loader(0.02, 0.18, 0.5).warn) << "10% exactly is not above the share";
  for (const double compute : {0.0, -1.0, std::nan("")}) {
    const LoaderAdvice none = advise_loader(0.5, compute, 0.5);
    EXPECT_FALSE(none.warn) << compute;
    EXPECT_EQ(none.threads_needed, 1) << compute;
  }
  EXPECT_EQ(advise_loader(0.5, 0.1, std::nan("")).threads_needed, 1) << "no loader timing (synthetic crops)";
}

}  // namespace
}  // namespace pcdino::train
