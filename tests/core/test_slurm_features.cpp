// The Slurm feature table (core/slurm_features.hpp): releases compared by major.minor, unknown names refused.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

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
  for (const char* name : {"health_check_timeout", "metrics_auth_users", "health_check_reboot_only"}) {
    EXPECT_FALSE(slurm::has("25.11.8", name)) << name;
    EXPECT_TRUE(slurm::has("26.05.3", name)) << name;
  }
}

// The slurm.conf lines that ask for a row: the key as Slurm reads it, a row's value among the line's items.
TEST(SlurmFeatures, ASettingAsksForTheRowsOfItsKeyAndItems) {
  const auto names = [](const std::string& key, const std::string& value) {
    std::string out;
    for (const auto* f : slurm::features_of_setting(key, value))
      out += std::string(out.empty() ? "" : " ") + f->name;
    return out;
  };
  EXPECT_EQ(names("HealthCheckTimeout", "30"), "health_check_timeout");
  EXPECT_EQ(names("healthchecktimeout", "30"), "health_check_timeout");
  EXPECT_EQ(names("HealthCheckNodeState", "IDLE"), "");
  EXPECT_EQ(names("HealthCheckNodeState", "idle,reboot_only"), "health_check_reboot_only");
  EXPECT_EQ(names("HealthCheckNodeState", "START_ONLY,REBOOT_ONLY"),
            "health_check_start_only health_check_reboot_only");
  EXPECT_EQ(names("SlurmctldParameters", "enable_expedited_requeue_x"), "") << "an item, not a prefix";
  EXPECT_EQ(names("PrologFlags", "Alloc,DeferBatch,ForceRequeueOnFail"), "force_requeue_on_fail");
  EXPECT_EQ(names("MetricsAuthUsers", "alice,bob"), "metrics_auth_users");
  EXPECT_EQ(names("HealthCheckInterval", "300"), "");
}

// The image-spec fuzzer's crash (ami/fuzz/corpus/image-spec/crash-nccl-component-past-a-long.yaml): a version
// component of 20 digits or more overflowed a long (UBSan: undefined behaviour); it ends the comparable part.
TEST(Versions, AComponentPastALongEndsTheComparablePart) {
  using parallelcluster::version_numbers;
  EXPECT_EQ(version_numbers("2.99999999999999999999.1"), std::vector<long>{2});
  EXPECT_EQ(version_numbers("9223372036854775807.1"), (std::vector<long>{9223372036854775807L, 1}));
  EXPECT_EQ(version_numbers("9223372036854775808.1"), std::vector<long>{});
  EXPECT_EQ(version_numbers("2.12.7-1"), (std::vector<long>{2, 12, 7}));
  EXPECT_LT(parallelcluster::compare_versions("2.1" + std::string(100, '0') + "2.7-1", "2.18.5"), 0);
  EXPECT_FALSE(slurm::has("25.1" + std::string(30, '9'), "openmetrics"));
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
    EXPECT_NE(std::string(f.key), "") << f.name;
    previous = f.first_release;
  }
}

// ParallelCluster 3.16's Slurm (the examples' release) has what pcdino uses from 25.11.
TEST(SlurmFeatures, NewestParallelClusterReleaseHasThem) {
  const std::string slurm = parallelcluster::newest_release().slurm;
  EXPECT_TRUE(slurm::has(slurm, "openmetrics")) << slurm;
  EXPECT_TRUE(slurm::has(slurm, "expedited_requeue")) << slurm;
}
