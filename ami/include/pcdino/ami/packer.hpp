// What `pcdino ami generate` writes for an image spec: a Packer template (HCL2, and the JSON form that
// Packer 1.6 reads), one provisioning script per component, the image's manifest, and verify.sh for a
// booted node.
#pragma once

#include <string>
#include <vector>

#include "pcdino/ami/spec.hpp"

namespace pcdino::ami {

struct GeneratedFile {
  std::string path;  ///< relative to the output folder
  std::string content;
  bool executable = false;
};

/// The files for `spec`:
///   image.pkr.hcl, image.json        Packer templates (amazon-ebs from ParallelCluster's official AMI)
///   plugins.pkr.hcl                  the amazon plugin for Packer >= 1.7 (`packer init .`)
///   scripts/NN-component.sh          one per component: set -euo pipefail, does nothing if the pinned
///                                    version is already there, checks what it installed
///   files/manifest.json              every component and version; installed as /opt/pcdino/manifest.json
///   files/README                     what else belongs in files/ (pcdino's source tarball,
///                                    source_package_name(), or with build.pcdino: package the binary
///                                    package, package_name())
///   verify.sh                        on a booted node: manifest against reality, then a two-node
///                                    nccl-tests all_reduce through Slurm against the published floor
///   ami_cleanup.sh                   the last provisioner: host keys, cloud-init state, logs, uploads
/// Throws ConfigError if check_compatibility() finds a problem (all of them, one per line).
std::vector<GeneratedFile> generate_image(const ImageSpec& spec);

/// The pcdino package's name without ".tar.gz", as cmake/PcdinoPackage.cmake's CPack names it and the image
/// installs it: "pcdino-<version>-<os>-x86_64" (also the tarball's top-level folder).
std::string package_name(const std::string& pcdino_version, const std::string& os);

/// pcdino's source tarball without ".tar.gz", as `scripts/package --source` names it and a source-built
/// image builds it: "pcdino-<version>-src" (also the tarball's top-level folder).
std::string source_package_name(const std::string& pcdino_version);

/// Writes `files` under `out_dir` (each atomically, scripts mode 0755). Throws CantCreateError.
void write_generated(const std::vector<GeneratedFile>& files, const std::string& out_dir);

}  // namespace pcdino::ami
