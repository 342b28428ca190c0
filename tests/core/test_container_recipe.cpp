// The GPU container recipe (container/Dockerfile, issue #63) against pcdino's ParallelCluster release table:
// it cannot be built here (no registry, no docker), so its pins are what is checked.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "pcdino/core/fs.hpp"
#include "pcdino/core/parallelcluster.hpp"

using namespace pcdino;

namespace {

std::string dockerfile() {
  return read_file(PCDINO_SOURCE_DIR "/container/Dockerfile", "container/Dockerfile");
}

// The default of `ARG NAME=VALUE`; "" when the file has none.
std::string arg_default(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex arg("(^|\n)ARG " + name + "=([^\\s]+)");
  return std::regex_search(text, m, arg) ? m[2].str() : "";
}

}  // namespace

TEST(ContainerRecipe, EfaInstallerIsTheNewestReleases) {
  const parallelcluster::Release& newest = parallelcluster::newest_release();
  ASSERT_NE(std::string(newest.efa_installer), "") << newest.release << " has no EFA installer in the table";
  EXPECT_EQ(arg_default(dockerfile(), "EFA_INSTALLER_VERSION"), newest.efa_installer)
      << "container/Dockerfile's EFA installer is not ParallelCluster " << newest.release << "'s";
}

TEST(ContainerRecipe, TheBaseImageIsPinnedToARelease) {
  const std::string text = dockerfile();
  const std::string tag = arg_default(text, "PYTORCH_TAG");
  EXPECT_TRUE(std::regex_match(tag, std::regex("[0-9]{2}\\.[0-9]{2}-py3")))
      << "not a YY.MM-py3 release: " << tag;
  EXPECT_NE(text.find("FROM nvcr.io/nvidia/pytorch:${PYTORCH_TAG}"), std::string::npos);
  EXPECT_EQ(text.find(":latest"), std::string::npos);
  // What the image holds where the pipeline and the logs expect it.
  const std::string install =
      read_file(PCDINO_SOURCE_DIR "/container/install-pcdino.sh", "container/install-pcdino.sh");
  EXPECT_NE(install.find("-DCMAKE_INSTALL_PREFIX=/opt/pcdino"), std::string::npos);
  EXPECT_NE(install.find("/etc/pcdino/image.txt"), std::string::npos);
}
