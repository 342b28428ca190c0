// The accelerator kinds' table (core/accelerator.hpp): one row per kind, found by every name it goes by,
// and the same kinds as the build's list that the components' per-kind files are built from.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pcdino/core/accelerator.hpp"

namespace pcdino {
namespace {

TEST(CoreAccelerators, TheBuildsKindsAreTheTables) {
  // cmake/PcdinoAccelerators.cmake's list, joined by spaces (tests/CMakeLists.txt).
  EXPECT_EQ(accelerator_names(" "), PCDINO_ACCELERATOR_KINDS);
}

TEST(CoreAccelerators, EveryKindIsFoundByEachOfItsNamesAndOwnsItsVariables) {
  std::set<std::string> names, variables, spank;
  for (const auto& kind : accelerator_kinds()) {
    EXPECT_TRUE(names.insert(kind.name).second) << kind.name;
    EXPECT_EQ(accelerator_kind(kind.name), &kind);
    for (const char* alias : kind.device_names) {
      EXPECT_TRUE(names.insert(alias).second) << alias;
      EXPECT_EQ(accelerator_kind(alias), &kind);
      EXPECT_EQ(unsupported_accelerator(alias), kind.unsupported);
    }
    for (const char* model : kind.instance_devices) EXPECT_EQ(accelerator_of_device(model), &kind);
    EXPECT_TRUE(variables.insert(kind.visible_devices_variable).second) << kind.visible_devices_variable;
    EXPECT_TRUE(spank.insert(kind.spank_devices).second) << kind.spank_devices;
    // A kind pcdino does not compute on says so, and why, naming itself.
    const std::string refused = unsupported_accelerator(kind.name);
    EXPECT_EQ(refused, kind.unsupported);
    if (!refused.empty()) {
      EXPECT_NE(refused.find(kind.name), std::string::npos) << refused;
    }
  }
  EXPECT_EQ(accelerator_kind("cpu"), nullptr);
  EXPECT_EQ(unsupported_accelerator("cpu"), "");
  EXPECT_EQ(unsupported_accelerator("auto"), "");
  EXPECT_EQ(accelerator_of_device("H100"), nullptr);
  EXPECT_EQ(accelerator_of_device(""), nullptr);
}

TEST(CoreAccelerators, TheKindsPcdinoComputesOnAreNotRefused) {
  ASSERT_NE(accelerator_kind("nvidia"), nullptr);
  EXPECT_EQ(unsupported_accelerator("nvidia"), "");
  EXPECT_TRUE(accelerator_kind("nvidia")->slurm_gres);
  EXPECT_STREQ(accelerator_kind("nvidia")->torch_device, "cuda");
  // A kind without a LibTorch device is one pcdino refuses to train on.
  for (const auto& kind : accelerator_kinds())
    EXPECT_EQ(*kind.torch_device == '\0', *kind.unsupported != '\0') << kind.name;
  // The others are listed by unsupported_accelerator_names, in the table's order.
  std::string expected;
  for (const auto& kind : accelerator_kinds()) {
    if (*kind.unsupported != '\0') expected += (expected.empty() ? "" : ", ") + std::string(kind.name);
  }
  EXPECT_EQ(unsupported_accelerator_names(", "), expected);
  EXPECT_FALSE(expected.empty());
}

}  // namespace
}  // namespace pcdino
