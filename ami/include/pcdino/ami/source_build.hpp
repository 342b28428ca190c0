// What an image needs to build pcdino from its source on the build instance, the way ParallelCluster's
// cookbook builds Pyxis there (aws-parallelcluster-cookbook install_pyxis.rb: against /opt/slurm/include):
// the pinned LibTorch downloads and library sources, and each OS's packages for pcdino's dependencies (the
// Slurm each release installs is in pcdino/core/parallelcluster.hpp). Each fact is a table row with its
// source.
#pragma once

#include <string>
#include <vector>

namespace pcdino::ami {

/// One LibTorch C++ distribution of PyTorch: release x compute variant.
struct LibTorchArtifact {
  const char* version;  ///< as pinned in versions.libtorch: "2.5.1+cu124", "2.5.1+cpu"
  const char* url;      ///< the zip on PyTorch's download server
  const char* sha256;   ///< PyTorch publishes none: the digest recorded where `source` says
  const char* source;   ///< where the digest was recorded (repository, file, line)
};

/// The artefact pinned as `version` ("2.5.1+cu124"), or nullptr if the table does not hold it.
const LibTorchArtifact* libtorch_artifact(const std::string& version);

/// Every row (for messages and tests).
const std::vector<LibTorchArtifact>& libtorch_artifacts();

/// The CUDA major.minor a LibTorch variant was built for ("2.5.1+cu124" -> "12.4", "2.5.1+cu118" -> "11.8"),
/// "" for a CPU variant ("+cpu"). Throws std::invalid_argument for a version without "+cpu" or "+cuXYZ".
std::string libtorch_cuda(const std::string& libtorch_version);

/// A library's source release that the image builds where its OS packages none, pinned by digest as the
/// LibTorch downloads are.
struct SourceRelease {
  const char* name;     ///< "prometheus-cpp"
  const char* version;  ///< "1.0.1"
  const char* url;      ///< the release's source tarball
  const char* sha256;   ///< recorded where `source` says
  const char* source;
};

/// prometheus-cpp for pcdino's metrics (monitoring/): the release that Debian 12 and Ubuntu 24.04 package,
/// built (core only, static) by the image's 85-pcdino.sh on an OS without a package
/// (OsBuildPackages::prometheus_cpp empty).
const SourceRelease& prometheus_cpp_release();

/// How an OS provides pcdino's build dependencies. `packages` is the install list for the image's package
/// manager; `missing` names the dependencies the OS's own repositories lack (then a source build on it is
/// refused by check_compatibility, naming them). MPI, libfabric, Slurm, CUDA and NCCL are not here: the
/// image takes them from ParallelCluster's AMI (/opt/amazon/openmpi, /opt/amazon/efa, /opt/slurm) and from
/// its own CUDA and NCCL steps; LibTorch comes from libtorch_artifact().
struct OsBuildPackages {
  const char* os;  ///< ParallelCluster's Image.Os name
  std::vector<const char*> packages;
  std::vector<const char*> missing;  ///< "HDF5 (source)" per dependency the OS lacks
  const char* prometheus_cpp;        ///< its prometheus-cpp package, "" = none: the pinned release is built
  const char* source;
};

/// The row for `os`, or nullptr for an OS the table does not know.
const OsBuildPackages* os_build_packages(const std::string& os);

}  // namespace pcdino::ami
