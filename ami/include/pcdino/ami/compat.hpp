// Which versions of the accelerator stack work together, each rule with its published source, so that an
// impossible image is rejected before a 20-minute Packer build instead of failing on the first job.
#pragma once

#include <string>
#include <vector>

#include "pcdino/ami/spec.hpp"

namespace pcdino::ami {

/// One violated rule: both components, the versions, and the source of the rule.
struct Incompatibility {
  std::string first;   ///< e.g. "versions.nvidia_driver 470.57.02"
  std::string second;  ///< e.g. "versions.cuda 11.6.2"
  std::string why;     ///< "CUDA 11.6 needs driver >= 510.39.01"
  std::string source;  ///< "NVIDIA CUDA Toolkit release notes, Table 3"
  std::string message() const;
};

/// Every rule `spec` breaks (empty if none): Fabric Manager against the driver on NVSwitch types (when the
/// driver is not the base AMI's, versions.fabric_manager must be pinned to it), the NVIDIA driver against
/// the CUDA toolkit's minimum,
/// NCCL's published builds against the CUDA major/minor, aws-ofi-nccl's NCCL requirement, the OS against
/// the ParallelCluster version's supported OSes, and known runfiles for the CUDA version. A source build
/// (build.pcdino: source) also needs: the OS's packages for pcdino's dependencies (missing ones named), the
/// release's Slurm in the table, versions.libtorch in the download table, its CUDA major.minor equal to
/// versions.cuda (a +cpu variant without an NVIDIA accelerator, never with one), and the driver at or above
/// its CUDA's floor (source_build.hpp). A pinned versions.node_exporter must be the OS's own package at its
/// version (node_exporter.hpp); an OS without one refuses it. verify.instance_type must carry the image's
/// accelerator (accelerators.hpp), and each accelerator kind adds its own rules (its release table's OSes,
/// devices and instance families: pcdino/ami/<kind>.hpp). Whatever the image fetches must be pinned: a file
/// by its sha256, a git source by its tag's commit, a package repository by its key's fingerprint
/// (downloads.hpp); a version without a pin is refused unless the base AMI ships it.
std::vector<Incompatibility> check_compatibility(const ImageSpec& spec);

/// Whether `instance_type` has NVSwitches (p4d, p4de, p5, p5e, p5en), where NVIDIA Fabric Manager must run
/// at exactly the driver's version or CUDA reports "system not yet initialized".
bool has_nvswitch(const std::string& instance_type);

/// The CUDA runfile's bundled driver for a full CUDA version ("11.6.2" -> "510.47.03"), or "" if the
/// table does not know it (the runfile name cuda_{cuda}_{driver}_linux.run needs it).
std::string cuda_runfile_driver(const std::string& cuda_version);

/// The full CUDA version an image installs for versions.cuda: itself when it names an update ("12.4.1"),
/// else the latest update of that major.minor in the runfile table ("11.6" -> "11.6.2"; "11.6" unchanged if
/// the table has none).
std::string cuda_full_version(const std::string& cuda);

/// Published two-node nccl-tests all_reduce_perf bus bandwidth floor in GB/s for `instance_type`, with
/// its source, or 0 if none is published (verify.sh then reports the figure without judging it).
double nccl_busbw_threshold(const std::string& instance_type, std::string* source);

/// The libfabric release an EFA installer release ships ("1.36.0" -> "1.22.0"; EFA installer CHANGELOG), or
/// "" for a release the table does not know.
std::string efa_installer_libfabric(const std::string& efa_installer);

/// GPUs of `instance_type` (0 if unknown or none).
int gpus_per_instance(const std::string& instance_type);

}  // namespace pcdino::ami
