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

// The NGC image's HPC-X Open MPI and rdma-core are out of the way before the EFA installer, and Open MPI
// finds its own components (awsome-distributed-training's NGC recipes); pcdino is built against EFA's
// libfabric, and only with CUDA and NCCL.
TEST(ContainerRecipe, TheEfaStackReplacesTheBaseImagesMpi) {
  const std::string text = dockerfile();
  const auto removed = text.find("rm -rf /opt/hpcx/ompi /usr/local/mpi");
  const auto rdma = text.find("apt-get remove -y --allow-change-held-packages libmlx5-1");
  const auto installer = text.find("./efa_installer.sh");
  ASSERT_NE(installer, std::string::npos);
  EXPECT_LT(removed, installer) << "HPC-X's Open MPI is removed before the EFA installer runs";
  EXPECT_LT(rdma, installer) << "NGC's rdma-core packages are removed before the EFA installer runs";
  EXPECT_NE(text.find("OPAL_PREFIX=/opt/amazon/openmpi"), std::string::npos);
  const std::string install =
      read_file(PCDINO_SOURCE_DIR "/container/install-pcdino.sh", "container/install-pcdino.sh");
  EXPECT_NE(install.find("/opt/amazon/efa/lib/pkgconfig"), std::string::npos);
  EXPECT_NE(install.find("-DPCDINO_REQUIRE_TORCH_CUDA=ON"), std::string::npos);
}
