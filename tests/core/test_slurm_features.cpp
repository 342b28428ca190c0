// The Slurm feature table (core/slurm_features.hpp): releases compared by major.minor, unknown names refused.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/slurm_features.hpp"

using namespace pcdino;

TEST(SlurmFeatures, FirstReleaseAndLater) {
  EXPECT_FALSE(slurm::has("22.05.8", "force_requeue_on_fail"));  // Debian 12's slurmd refuses the flag
  EXPECT_TRUE(slurm::has("23.02", "force_requeue_on_fail"));
  EXPECT_TRUE(slurm::has("24.11.5", "force_requeue_on_fail"));
  EXPECT_FALSE(slurm::has("24.11.5", "expedited_requeue"));
  EXPECT_FALSE(slurm::has("25.05.3", "openmetrics"));
  EXPECT_TRUE(slurm::has("25.11.7", "openmetrics"));
  EXPECT_TRUE(slurm::has("25.11.8", "expedited_requeue"));
  EXPECT_TRUE(slurm::has("26.05.0", "health_check_start_only"));
}

TEST(SlurmFeatures, UnknownVersionHasNothingAndUnknownNameThrows) {
  EXPECT_FALSE(slurm::has("", "openmetrics"));
  EXPECT_FALSE(slurm::has("unknown", "openmetrics"));
  EXPECT_THROW(slurm::has("25.11.7", "openmetric"), std::invalid_argument);
  EXPECT_THROW(slurm::feature("no-such-feature"), std::invalid_argument);
}

TEST(SlurmFeatures, RowsAreWholeAndUnique) {
  std::set<std::string> names;
  std::string previous = "0";
  for (const auto& f : slurm::features()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(parallelcluster::version_numbers(f.first_release).size(), 2U) << f.name;
    EXPECT_GE(parallelcluster::compare_versions(f.first_release, previous), 0) << f.name << ": oldest first";
    EXPECT_NE(std::string(f.what), "") << f.name;
    EXPECT_NE(std::string(f.source), "") << f.name;
    previous = f.first_release;
  }
}

// ParallelCluster 3.16's Slurm (the examples' release) has what pcdino uses from 25.11.
TEST(SlurmFeatures, NewestParallelClusterReleaseHasThem) {
  const std::string slurm = parallelcluster::newest_release().slurm;
  EXPECT_TRUE(slurm::has(slurm, "openmetrics")) << slurm;
  EXPECT_TRUE(slurm::has(slurm, "expedited_requeue")) << slurm;
}
