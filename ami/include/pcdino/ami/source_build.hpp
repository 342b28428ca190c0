// What an image needs to build pcdino from its source on the build instance, the way ParallelCluster's
// cookbook builds Pyxis there (aws-parallelcluster-cookbook install_pyxis.rb: against /opt/slurm/include):
// the Slurm each ParallelCluster release installs, the pinned LibTorch downloads, and each OS's packages
// for pcdino's dependencies. Each fact is a table row with its source.
#pragma once

#include <string>
#include <vector>

namespace pcdino::ami {

/// The Slurm a ParallelCluster release builds into its AMIs' /opt/slurm (headers in /opt/slurm/include).
struct SlurmRelease {
  const char* parallelcluster;  ///< "3.11.1"
  const char* slurm;            ///< "23.11.10"
  const char* source;           ///< the cookbook file (and line) or CHANGELOG entry
};

/// The row for `parallelcluster_version`, or nullptr for a release the table does not know.
const SlurmRelease* slurm_release(const std::string& parallelcluster_version);

/// Every row, oldest release first (for messages and tests).
const std::vector<SlurmRelease>& slurm_releases();

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

/// How an OS provides pcdino's build dependencies. `packages` is the install list for the image's package
/// manager; `missing` names the dependencies the OS's own repositories lack (then a source build on it is
/// refused by check_compatibility, naming them). MPI, libfabric, Slurm, CUDA and NCCL are not here: the
/// image takes them from ParallelCluster's AMI (/opt/amazon/openmpi, /opt/amazon/efa, /opt/slurm) and from
/// its own CUDA and NCCL steps; LibTorch comes from libtorch_artifact().
struct OsBuildPackages {
  const char* os;  ///< ParallelCluster's Image.Os name
  std::vector<const char*> packages;
  std::vector<const char*> missing;  ///< "HDF5 (source)" per dependency the OS lacks
  const char* source;
};

/// The row for `os`, or nullptr for an OS the table does not know.
const OsBuildPackages* os_build_packages(const std::string& os);

}  // namespace pcdino::ami
