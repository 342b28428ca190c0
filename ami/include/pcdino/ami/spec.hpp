// The image spec of `pcdino ami`: one YAML file that pins every component of a compute-node image.
//
//   name: pcdino-workshop
//   region: us-west-2
//   base: {parallelcluster_version: "3.8.0", os: alinux2}   # or ami: ami-0123... to start elsewhere
//   build: {instance_type: c6i.4xlarge, root_volume_gb: 100, pcdino: source}  # no GPU needed to build
//   accelerator: nvidia                                      # a kind of core/accelerator.hpp, or none
//   versions: {nvidia_driver: "510.47.03", cuda: "11.6.2", cudnn: "8.4.1.50", nccl: "2.12.7-1",
//              efa_installer: "1.15.1", aws_ofi_nccl: "1.3.0", enroot: "3.4.0", pyxis: "0.12.0",
//              nccl_tests: "2.11.0", pcdino: "0.1.0", libtorch: "2.5.1+cu124",
//              node_exporter: "1.3.1"}                     # optional: ubuntu2204's own package
//   verify: {instance_type: g4dn.12xlarge, nodes: 2, gpus_per_node: 4}
#pragma once

#include <map>
#include <string>

namespace pcdino::ami {

struct ImageSpec {
  std::string name;
  std::string region;
  std::string
      parallelcluster_version;  ///< of the official base AMI (and the AMI's parallelcluster:version tag)
  std::string os;               ///< alinux2, alinux2023, ubuntu2204
  std::string base_ami;         ///< explicit base AMI id; empty = ParallelCluster's official one
  /// Building needs no GPU (the driver's kernel module is built, not loaded): a CPU type with cores for
  /// NCCL's compile.
  std::string build_instance_type = "c6i.4xlarge";
  int root_volume_gb = 100;
  /// How the image gets pcdino: "source" (default) builds it on the build instance from the source tarball
  /// (`scripts/package --source`) against the AMI's /opt/slurm/include, CUDA, NCCL, Open MPI and libfabric
  /// and the pinned versions.libtorch; "package" installs a prebuilt `scripts/package` tarball made
  /// elsewhere.
  std::string pcdino_from = "source";
  /// an accelerator kind's name (core/accelerator.hpp's table), or none
  std::string accelerator = "nvidia";
  /// Pinned versions by component: nvidia_driver, cuda, cudnn, nccl, efa_installer, aws_ofi_nccl, enroot,
  /// pyxis, nccl_tests, pcdino, libtorch (which ones are required depends on the accelerator and on
  /// pcdino_from).
  std::map<std::string, std::string> versions;
  std::string verify_instance_type;  ///< for verify.sh's bus-bandwidth threshold; default build type
  int verify_nodes = 2;
  int verify_gpus_per_node = 0;  ///< 0: from the instance catalogue in verify.sh
  std::string source;            ///< file it was read from
};

/// Components every spec pins; each accelerator kind adds its own, required and optional (its row of the
/// accelerator kinds, src/<kind>.cpp).
inline const char* const kCommonComponents[] = {"efa_installer", "enroot", "pyxis", "pcdino"};
/// Pinned when pcdino is built from source: the LibTorch download ("2.5.1+cu124", source_build.hpp).
inline const char* const kSourceBuildComponents[] = {"libtorch"};
/// Pinned only where wanted, on any accelerator: the Prometheus node exporter from the OS's own package at
/// its version (node_exporter.hpp; "1.3.1" on ubuntu2204), with its textfile collector on the directory
/// pcdino's stages write their metrics to. check_compatibility refuses it on an OS without the package.
inline const char* const kOptionalComponents[] = {"node_exporter"};

/// Parses a spec. Throws pcdino::ConfigError ("file:line:col: key.path: what") for unknown keys, missing
/// required keys, bad values (region, instance type, version strings, OS names, build.pcdino), components
/// pinned that the accelerator does not use, and versions.libtorch with build.pcdino: package.
ImageSpec parse_image_spec(const std::string& yaml_text, const std::string& source);

/// Reads and parses `path`; NoInputError if it cannot be read.
ImageSpec load_image_spec(const std::string& path);

}  // namespace pcdino::ami
