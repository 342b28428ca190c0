#include "pcdino/ami/compat.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "accelerator_image.hpp"
#include "pcdino/ami/downloads.hpp"
#include "pcdino/ami/node_exporter.hpp"
#include "pcdino/ami/source_build.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::ami {

namespace {

using parallelcluster::version_numbers;

int compare(const std::string& a, const std::string& b) {
  return parallelcluster::compare_versions(a, b);
}

const char* const kCudaNotes =
    "NVIDIA CUDA Toolkit release notes, Table 3 'CUDA Toolkit and Corresponding Driver Versions' (Linux, GA)";

// Minimum Linux driver for each CUDA toolkit's GA release (full functionality, no forward compatibility).
const std::map<std::string, std::string>& cuda_min_driver() {
  static const std::map<std::string, std::string> table = {
      {"11.0", "450.36.06"}, {"11.1", "455.23"},    {"11.2", "460.27.03"}, {"11.3", "465.19.01"},
      {"11.4", "470.42.01"}, {"11.5", "495.29.05"}, {"11.6", "510.39.01"}, {"11.7", "515.43.04"},
      {"11.8", "520.61.05"}, {"12.0", "525.60.13"}, {"12.1", "530.30.02"}, {"12.2", "535.54.03"},
      {"12.3", "545.23.06"}, {"12.4", "550.54.14"}, {"12.5", "555.42.02"}, {"12.6", "560.28.03"},
      {"12.8", "570.26"},    {"12.9", "575.51.03"}, {"13.0", "580.65.06"}, {"13.1", "590.44.01"},
      {"13.2", "595.45.04"}, {"13.3", "610.43.02"},
  };
  return table;
}

// Runfiles on developer.download.nvidia.com: cuda_{version}_{bundled driver}_linux.run.
const std::map<std::string, std::string>& cuda_runfiles() {
  static const std::map<std::string, std::string> table = {
      {"11.6.0", "510.39.01"},  {"11.6.2", "510.47.03"}, {"11.7.1", "515.65.01"},  {"11.8.0", "520.61.05"},
      {"12.0.1", "525.85.12"},  {"12.1.1", "530.30.02"}, {"12.2.2", "535.104.05"}, {"12.3.2", "545.23.08"},
      {"12.4.1", "550.54.15"},  {"12.5.1", "555.42.06"}, {"12.6.2", "560.35.03"},  {"12.6.3", "560.35.05"},
      {"12.8.1", "570.124.06"}, {"12.9.1", "575.57.08"}, {"13.0.2", "580.95.05"},  {"13.1.1", "590.48.01"},
      {"13.2.1", "595.58.03"},  {"13.2.2", "595.71.05"},
  };
  return table;
}

struct NcclRelease {
  const char* version;
  std::vector<const char*> cuda_builds;
  const char* source;
};

const char* const kNcclRedist =
    "NVIDIA redist index developer.download.nvidia.com/compute/redist/nccl/ (files per CUDA build)";
const char* const kNcclDownloads =
    "NVIDIA NCCL downloads page (builds listed per CUDA version; not re-checked against the redist index)";

// The CUDA versions NVIDIA published builds of each NCCL release for. A build for CUDA X.Y runs on
// CUDA X.Y' >= X.Y of the same major (CUDA minor version compatibility).
const std::vector<NcclRelease>& nccl_releases() {
  static const std::vector<NcclRelease> table = {
      {"2.10.3", {"10.2", "11.0", "11.4"}, kNcclRedist},
      {"2.12.7", {"10.2", "11.0", "11.6"}, kNcclRedist},
      {"2.12.10", {"10.2", "11.0", "11.6"}, kNcclRedist},
      {"2.12.12", {"10.2", "11.0", "11.6"}, kNcclRedist},
      {"2.18.5", {"11.0", "12.2"}, kNcclDownloads},
      {"2.21.5", {"11.0", "12.2", "12.4"}, kNcclDownloads},
      {"2.23.4", {"12.2", "12.4", "12.6"}, kNcclDownloads},
  };
  return table;
}

const char* const kOfiNotes = "aws-ofi-nccl RELEASENOTES.md";

struct OfiRelease {
  const char* from;      // first aws-ofi-nccl release of this row
  const char* min_nccl;  // oldest NCCL it stays compatible with
  const char* min_libfabric;
};

// aws-ofi-nccl's floors by release: NCCL "backward compatible to" 2.4.8 until 1.10.0, then 2.17.1;
// libfabric >= 1.11.0, >= 1.18.0 from 1.8.0, >= 1.22.0 (platform-aws builds) from 1.13.0.
const std::vector<OfiRelease>& ofi_requirements() {
  static const std::vector<OfiRelease> table = {
      {"1.0.0", "2.4.8", "1.11.0"},
      {"1.8.0", "2.4.8", "1.18.0"},
      {"1.10.0", "2.17.1", "1.18.0"},
      {"1.13.0", "2.17.1", "1.22.0"},
  };
  return table;
}

// libfabric bundled by EFA installer releases (EFA installer CHANGELOG; ParallelCluster CHANGELOG entries
// that list the packages of each installer they adopt).
const std::map<std::string, std::string>& efa_libfabric() {
  static const std::map<std::string, std::string> table = {
      {"1.22.0", "1.17.0"}, {"1.22.1", "1.17.1"}, {"1.23.0", "1.18.0"}, {"1.24.1", "1.18.1"},
      {"1.25.1", "1.18.1"}, {"1.26.1", "1.18.2"}, {"1.29.1", "1.19.0"}, {"1.30.0", "1.19.0"},
      {"1.36.0", "1.22.0"}, {"1.41.0", "2.1.0"},  {"1.51.0", "2.7.0"},
  };
  return table;
}

const char* const kFabricManagerSource =
    "NVIDIA Fabric Manager user guide (driver and Fabric Manager versions must match); "
    "aws-parallelcluster-cookbook v3.11.1 resources/fabric_manager (installed at the driver's version, "
    "version-locked, started where lspci shows the P4 or P5 NVSwitch)";

const char* const kOneCuda =
    "pcdino's rule: its CUDA code (NCCL, CUDA graphs) is compiled with the image's toolkit and runs in one "
    "process with LibTorch's bundled CUDA runtime, so both are one CUDA major.minor";

// The node exporter comes from the OS's own package, at the version that package has.
void check_node_exporter(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  const auto it = spec.versions.find("node_exporter");
  if (it == spec.versions.end()) return;
  const NodeExporterPackage* row = node_exporter_package(spec.os);
  const std::string first = "versions.node_exporter " + it->second;
  if (row == nullptr) {
    found->push_back({first, "base.os " + spec.os, "no node exporter table row for " + spec.os,
                      "ami/src/node_exporter.cpp"});
  } else if (*row->package == '\0') {
    found->push_back({first, "base.os " + spec.os,
                      std::string(row->why) + ": leave versions.node_exporter out on " + spec.os +
                          " (no unpinned binary is fetched instead)",
                      row->source});
  } else if (it->second != row->version) {
    found->push_back(
        {first, "base.os " + spec.os,
         spec.os + "'s own " + row->package + " is " + row->version + ", the only one the image installs",
         row->source});
  }
}

// A source build (build.pcdino: source) needs the OS's packages, the release's Slurm in the table (the SPANK
// plugin is checked against it) and a known LibTorch download whose CUDA is the image's.
void check_source_build(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  if (spec.pcdino_from != "source") return;
  const OsBuildPackages* os = os_build_packages(spec.os);
  if (os == nullptr || !os->missing.empty()) {
    const std::string missing = os == nullptr ? "" : joined(os->missing, [](const char* m) { return m; });
    found->push_back({"base.os " + spec.os, "build.pcdino source",
                      os == nullptr ? "no package table for " + spec.os
                                    : spec.os + "'s repositories lack " + missing +
                                          "; build on ubuntu2204, or build the package on a host that has "
                                          "them and set build.pcdino: package",
                      os == nullptr ? "ami/src/source_build.cpp" : os->source});
  }
  const parallelcluster::Release* release = parallelcluster::find_release(spec.parallelcluster_version);
  if (release != nullptr && *release->slurm == '\0') {
    found->push_back({"base.parallelcluster_version " + spec.parallelcluster_version, "build.pcdino source",
                      "the Slurm of this release is unknown, so the SPANK plugin's build cannot be checked "
                      "against it",
                      release->source});
  }
  const auto it = spec.versions.find("libtorch");
  if (it == spec.versions.end()) return;
  const std::string& libtorch = it->second;
  if (libtorch_artifact(libtorch) == nullptr) {
    const std::string known =
        joined(libtorch_artifacts(), [](const LibTorchArtifact& a) { return a.version; });
    found->push_back({"versions.libtorch " + libtorch, "its download",
                      "no pinned download with a recorded sha256 (known: " + known + ")",
                      "ami/src/source_build.cpp, LibTorch table"});
  }
  const std::string torch_cuda = libtorch_cuda(libtorch);
  if (spec.accelerator != "nvidia") {
    if (!torch_cuda.empty())
      found->push_back({"versions.libtorch " + libtorch, "accelerator " + spec.accelerator,
                        "a CUDA LibTorch on an image without NVIDIA GPUs: pin the +cpu variant", kOneCuda});
    return;
  }
  const auto cuda = spec.versions.find("cuda");
  const auto driver = spec.versions.find("nvidia_driver");
  if (torch_cuda.empty()) {
    found->push_back({"versions.libtorch " + libtorch, "accelerator nvidia",
                      "a CPU-only LibTorch on a GPU image trains on the CPU: pin a +cu variant", kOneCuda});
    return;
  }
  if (cuda != spec.versions.end() && major_minor(cuda->second) != torch_cuda) {
    found->push_back({"versions.libtorch " + libtorch, "versions.cuda " + cuda->second,
                      "LibTorch " + libtorch + " is built for CUDA " + torch_cuda + ", the image's CUDA is " +
                          major_minor(cuda->second),
                      kOneCuda});
  }
  const auto floor = cuda_min_driver().find(torch_cuda);
  if (driver != spec.versions.end() && floor != cuda_min_driver().end() &&
      compare(driver->second, floor->second) < 0) {
    found->push_back({"versions.libtorch " + libtorch, "versions.nvidia_driver " + driver->second,
                      "LibTorch's CUDA " + torch_cuda + " runtime needs driver >= " + floor->second,
                      kCudaNotes});
  }
}

// The instance type verify.sh runs on must carry the image's accelerator: an image for one kind on another
// kind's instance type installs drivers for devices the node does not have.
void check_instance_accelerator(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  const AcceleratorInstance* node = accelerator_instance(spec.verify_instance_type);
  const std::string has = node != nullptr ? node->accelerator : "";
  const AcceleratorImage* kind = accelerator_image(spec.accelerator);
  const bool vendor = kind != nullptr && !kind->instances.empty();
  if (node != nullptr && has != spec.accelerator) {
    found->push_back({"accelerator " + spec.accelerator, "verify.instance_type " + spec.verify_instance_type,
                      spec.verify_instance_type + " carries " + node->device +
                          " devices: its image needs "
                          "accelerator: " +
                          has,
                      node->source});
  } else if (node == nullptr && vendor) {
    const std::string types = joined(kind->instances, [](const AcceleratorInstance& i) { return i.type; });
    found->push_back({"accelerator " + spec.accelerator, "verify.instance_type " + spec.verify_instance_type,
                      "not an instance type with " + spec.accelerator + " devices (known: " + types + ")",
                      "pcdino's instance table (ami/src/" + spec.accelerator + ".cpp)"});
  }
}

}  // namespace

bool has_nvswitch(const std::string& instance_type) {
  for (const char* family : {"p4d.", "p4de.", "p5.", "p5e.", "p5en."})
    if (instance_type.rfind(family, 0) == 0) return true;
  return false;
}

std::string major_minor(const std::string& v) {
  const auto n = version_numbers(v);
  if (n.size() < 2) return n.empty() ? v : std::to_string(n[0]);
  return std::to_string(n[0]) + "." + std::to_string(n[1]);
}

std::string Incompatibility::message() const {
  return first + " and " + second + " do not work together: " + why + " (source: " + source + ")";
}

std::string cuda_runfile_driver(const std::string& cuda_version) {
  const auto& runfiles = cuda_runfiles();
  const auto it = runfiles.find(cuda_version);
  if (it != runfiles.end()) return it->second;
  // "11.6" means its latest update in the table.
  std::string best;
  for (const auto& [v, driver] : runfiles) {
    if (major_minor(v) == cuda_version && version_numbers(cuda_version).size() == 2) best = driver;
  }
  return best;
}

std::string cuda_full_version(const std::string& cuda) {
  if (std::count(cuda.begin(), cuda.end(), '.') != 1) return cuda;
  // "11.6" -> the latest 11.6.x runfile the table knows.
  for (const char* patch : {"9", "8", "7", "6", "5", "4", "3", "2", "1", "0"})
    if (!cuda_runfile_driver(cuda + "." + patch).empty()) return cuda + "." + patch;
  return cuda;
}

std::vector<Incompatibility> check_compatibility(const ImageSpec& spec) {
  std::vector<Incompatibility> found;

  if (const std::string why = parallelcluster::os_support_problem(spec.parallelcluster_version, spec.os);
      !why.empty()) {
    found.push_back({"base.os " + spec.os, "base.parallelcluster_version " + spec.parallelcluster_version,
                     why, "pcdino/core/parallelcluster.hpp, operating systems"});
  }
  if (parallelcluster::find_release(spec.parallelcluster_version) == nullptr) {
    found.push_back({"base.parallelcluster_version " + spec.parallelcluster_version, "its official AMI",
                     std::string("not a release pcdino knows (") +
                         parallelcluster::releases().front().release + " to " +
                         parallelcluster::newest_release().release + ")",
                     "pcdino/core/parallelcluster.hpp, releases"});
  }

  check_source_build(spec, &found);
  check_node_exporter(spec, &found);
  if (spec.versions.count("dcgm_exporter") != 0 && spec.os != "ubuntu2204") {
    found.push_back(
        {"versions.dcgm_exporter " + spec.versions.at("dcgm_exporter"), "base.os " + spec.os,
         "pcdino installs dcgm-exporter from NVIDIA's CUDA repository for ubuntu2204 only: leave it out on " +
             spec.os,
         "ami/src/recipes/nvidia.cpp, 77-dcgm-exporter.sh"});
  }
  check_instance_accelerator(spec, &found);
  if (const AcceleratorImage* kind = accelerator_image(spec.accelerator)) kind->check(spec, &found);
  check_downloads(spec, &found);
  return found;
}

void check_nvidia(const ImageSpec& spec, std::vector<Incompatibility>* out) {
  std::vector<Incompatibility>& found = *out;
  const auto v = [&](const char* key) {
    const auto it = spec.versions.find(key);
    return it == spec.versions.end() ? std::string() : it->second;
  };
  const std::string driver = v("nvidia_driver"), cuda = v("cuda"), nccl = v("nccl"), ofi = v("aws_ofi_nccl");

  // Fabric Manager: pinned, it is the driver's; on NVSwitch nodes a driver other than the base AMI's needs
  // it.
  const std::string fm = v("fabric_manager");
  parallelcluster::Release official;
  const bool official_ami =
      spec.base_ami.empty() && parallelcluster::base_ami(spec.parallelcluster_version, spec.os, &official);
  const parallelcluster::Release* base = official_ami ? &official : nullptr;
  if (!fm.empty() && fm != driver) {
    found.push_back({"versions.fabric_manager " + fm, "versions.nvidia_driver " + driver,
                     "Fabric Manager must be the driver's exact version", kFabricManagerSource});
  } else if (fm.empty() && has_nvswitch(spec.verify_instance_type) &&
             (base == nullptr || driver != base->nvidia_driver)) {
    found.push_back(
        {"versions.nvidia_driver " + driver,
         "the base AMI's Fabric Manager " +
             std::string(base != nullptr && *base->nvidia_driver ? base->nvidia_driver : "(unknown)"),
         spec.verify_instance_type +
             " has NVSwitches: replacing the driver needs versions.fabric_manager: \"" + driver +
             "\" (the base AMI's stays at its own driver's version and CUDA finds no GPU)",
         kFabricManagerSource});
  }
  const std::string cuda_mm = major_minor(cuda);

  const auto min = cuda_min_driver().find(cuda_mm);
  if (min == cuda_min_driver().end()) {
    found.push_back({"versions.cuda " + cuda, "versions.nvidia_driver " + driver,
                     "CUDA " + cuda_mm + " is not in the driver table (known: 11.0-13.3)", kCudaNotes});
  } else if (compare(driver, min->second) < 0) {
    found.push_back({"versions.nvidia_driver " + driver, "versions.cuda " + cuda,
                     "CUDA " + cuda_mm + " needs driver >= " + min->second, kCudaNotes});
  }
  if (cuda_runfile_driver(cuda).empty()) {
    const std::string known = joined(cuda_runfiles(), [](const auto& row) { return row.first; });
    found.push_back({"versions.cuda " + cuda, "its runfile",
                     "no known runfile for CUDA " + cuda + " (known: " + known + ")",
                     "developer.download.nvidia.com/compute/cuda/<version>/local_installers/"});
  }

  const std::string nccl_release = [&] {
    const auto n = version_numbers(nccl);
    std::string s;
    for (std::size_t i = 0; i < n.size() && i < 3; ++i) s += (i ? "." : "") + std::to_string(n[i]);
    return s;
  }();
  const NcclRelease* release = nullptr;
  for (const auto& r : nccl_releases()) {
    if (nccl_release == r.version) release = &r;
  }
  if (release == nullptr) {
    const std::string known = joined(nccl_releases(), [](const NcclRelease& r) { return r.version; });
    found.push_back(
        {"versions.nccl " + nccl, "versions.cuda " + cuda,
         "NCCL " + nccl_release + " is not in the table of published builds (known: " + known + ")",
         kNcclRedist});
  } else {
    bool built = false;
    std::string builds;
    for (const char* b : release->cuda_builds) {
      builds += (builds.empty() ? "" : ", ") + std::string(b);
      if (version_numbers(b).at(0) == version_numbers(cuda_mm).at(0) && compare(b, cuda_mm) <= 0)
        built = true;
    }
    if (!built) {
      found.push_back({"versions.nccl " + nccl, "versions.cuda " + cuda,
                       "NCCL " + nccl_release + " was published for CUDA " + builds + ", none of CUDA " +
                           std::to_string(version_numbers(cuda_mm).at(0)) + ".x <= " + cuda_mm,
                       release->source});
    }
  }

  const OfiRelease* rule = nullptr;
  for (const auto& r : ofi_requirements()) {
    if (compare(ofi, r.from) >= 0) rule = &r;
  }
  if (rule != nullptr && compare(nccl, rule->min_nccl) < 0) {
    found.push_back({"versions.aws_ofi_nccl " + ofi, "versions.nccl " + nccl,
                     "aws-ofi-nccl " + ofi + " needs NCCL >= " + rule->min_nccl, kOfiNotes});
  }
  const std::string efa = v("efa_installer");
  const std::string fabric = efa_installer_libfabric(efa);
  if (rule != nullptr && !fabric.empty() && compare(fabric, rule->min_libfabric) < 0) {
    found.push_back({"versions.aws_ofi_nccl " + ofi, "versions.efa_installer " + efa,
                     "aws-ofi-nccl " + ofi + " needs libfabric >= " + rule->min_libfabric +
                         ", EFA installer " + efa + " ships libfabric " + fabric,
                     std::string(kOfiNotes) + "; EFA installer CHANGELOG"});
  }
}

double nccl_busbw_threshold(const std::string& instance_type, std::string* source) {
  // In-place busbw of a 1 GiB all_reduce on 2 nodes x 8 GPUs; the test asserts busbw > threshold.
  static const std::map<std::string, double> published = {{"p4d.24xlarge", 26.0}, {"p5.48xlarge", 250.0}};
  const auto it = published.find(instance_type);
  if (it == published.end()) return 0;
  if (source != nullptr) {
    *source = "aws-parallelcluster tests/integration-tests/tests/efa/test_efa.py, _test_nccl_benchmarks";
  }
  return it->second;
}

std::string efa_installer_libfabric(const std::string& efa_installer) {
  const auto it = efa_libfabric().find(efa_installer);
  return it == efa_libfabric().end() ? "" : it->second;
}

int gpus_per_instance(const std::string& t) {
  static const std::map<std::string, int> gpus = {
      {"g4dn.xlarge", 1},   {"g4dn.2xlarge", 1},  {"g4dn.4xlarge", 1}, {"g4dn.8xlarge", 1},
      {"g4dn.16xlarge", 1}, {"g4dn.12xlarge", 4}, {"g4dn.metal", 8},   {"g5.xlarge", 1},
      {"g5.2xlarge", 1},    {"g5.4xlarge", 1},    {"g5.8xlarge", 1},   {"g5.16xlarge", 1},
      {"g5.12xlarge", 4},   {"g5.24xlarge", 4},   {"g5.48xlarge", 8},  {"g6.xlarge", 1},
      {"g6.12xlarge", 4},   {"g6.48xlarge", 8},   {"p3.2xlarge", 1},   {"p3.8xlarge", 4},
      {"p3.16xlarge", 8},   {"p3dn.24xlarge", 8}, {"p4d.24xlarge", 8}, {"p4de.24xlarge", 8},
      {"p5.48xlarge", 8},
  };
  const auto it = gpus.find(t);
  return it == gpus.end() ? 0 : it->second;
}

}  // namespace pcdino::ami
