// What `pcdino doctor` measures on one node (issue #21): each probe is a plain function of this node,
// run by the doctor on every node of an allocation under a time limit. None needs MPI.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pcdino::doctor {

/// The shared filesystem as one user sees it from this node.
struct FilesystemProbe {
  bool exists = false;    ///< the directory exists
  bool writable = false;  ///< a file could be created, written, synced and read back
  double write_mb_s = 0;  ///< MB/s (10^6 bytes) of the write, fsync included
  double read_mb_s = 0;   ///< MB/s of reading it back after dropping it from the page cache
  std::string error;      ///< why not writable: the system error and the path
  int error_number = 0;   ///< errno of the failed call (0: none, or a wrong read-back)
};

/// Whether a failed call's errno says something about the filesystem that every node sees alike (ENOSPC,
/// EDQUOT, EACCES, EPERM: full, over quota, root squashed), not about this node: a warning, never a drain.
bool filesystem_wide_error(int error_number);

/// Writes `bytes` to a new file in `dir` (`.pcdino-doctor-{host}.tmp.{pid}.{random}`, made O_EXCL|O_NOFOLLOW
/// so that no user can take the name first or plant a link), fsyncs it, asks the kernel to drop it from the
/// page cache (posix_fadvise DONTNEED; a network filesystem may still serve it from its own cache), reads it
/// back, checks the content and removes it. First removes the files of this host's earlier probes whose
/// process is gone (a probe killed at its limit). Never throws: every failure is in `error` and
/// `error_number`.
FilesystemProbe probe_filesystem(const std::string& dir, std::size_t bytes);

/// Bytes available to an unprivileged user on the filesystem of `path` (statvfs f_bavail * f_frsize);
/// nullopt if `path` cannot be examined.
std::optional<std::uint64_t> free_bytes(const std::string& path);

/// This node as the kernel sees it.
struct HostResources {
  int cpus = 0;                  ///< online CPUs (sysconf _SC_NPROCESSORS_ONLN)
  std::uint64_t memory_mib = 0;  ///< physical memory in MiB (2^20 bytes)
  int gpus = 0;                  ///< NVIDIA device files /dev/nvidia<N> under `dev` (what the driver exposes)
};

/// The resources of this node; `dev` is the device directory (tests point it elsewhere).
HostResources host_resources(const std::string& dev = "/dev");

/// A node as Slurm's controller describes it (`scontrol show node -o NAME`).
struct SlurmNodeView {
  std::string name;
  int cpus = 0;                         ///< CPUTot
  std::uint64_t real_memory_mib = 0;    ///< RealMemory (MiB)
  int gpus = 0;                         ///< the counts of every gpu entry of Gres (gpu:4, gpu:a100:8(S:0-1))
  std::vector<std::string> features;    ///< AvailableFeatures, in order (none for "(null)")
  std::string state;                    ///< State: "IDLE", "IDLE+DRAIN", "MIXED+DRAIN", "DOWN+NOT_RESPONDING"
  std::string reason;                   ///< Reason without Slurm's " [user@time]" ("" = none)
  std::vector<std::string> partitions;  ///< Partitions, in order (none when the node is in none)
};

/// Whether a node's State names the DRAIN flag (drained, or draining while its jobs end).
bool drained(const SlurmNodeView& node);

/// Parses one line of `scontrol show node -o`. Throws DataError naming the line when NodeName or CPUTot
/// is missing.
SlurmNodeView parse_scontrol_node(const std::string& line);

/// The EC2 instance type among a node's Slurm features: the first one with a dot ("p4d.24xlarge"), "" when
/// none. ParallelCluster gives each node the features static or dynamic, its instance type, its compute
/// resource's name and efa and gpu where they apply (aws-parallelcluster-cookbook, slurm templates,
/// slurm_parallelcluster_utils.conf, feature_property); only the instance type has a dot.
std::string instance_type_feature(const std::vector<std::string>& features);

/// The EFA devices libfabric shows on this node: the distinct domains of its efa provider's RDM endpoints
/// ("rdmap0s6-rdm"; libfabric lists each device's RDM and DGRAM endpoints, from 2.0 also efa-direct's,
/// prov/efa/src/efa_prov.c), or the error fi_getinfo gave as the only element prefixed "error: " (none: no
/// element).
std::vector<std::string> efa_devices();

/// The libfabric providers fi_getinfo reports on this node (each named once, in libfabric's order), or
/// the error fi_getinfo gave as its only element prefixed "error: ".
std::vector<std::string> fabric_providers();

/// Where a node keeps the version of the parts of its image that no library call reports (tests point
/// them elsewhere).
struct VersionFiles {
  std::string nvidia_driver = "/proc/driver/nvidia/version";  ///< "NVRM version: ... Module  550.127.05 ..."
  std::string cuda = "/usr/local/cuda/version.json";          ///< {"cuda": {"version": "12.4.1"}}
  std::string efa_installer = "/opt/amazon/efa_installed_packages";  ///< "# EFA installer version: 1.36.0"
};

/// The versions this node runs, by the image manifest's component names (`pcdino ami`'s manifest.json),
/// without running any program: libfabric (fi_version(), major.minor) and nccl (ncclGetVersion()) as the
/// SPANK plugin detects them, openmpi (MPI_Get_library_version, "Open MPI v4.1.4"), nvidia_driver, cuda and
/// efa_installer from their version files, pcdino (this build). A component not found is absent.
std::map<std::string, std::string> image_versions(const VersionFiles& files = {});

/// The image manifest against a node: each component both the manifest and `node` can name, compared on
/// the parts the node's source reports (libfabric major.minor, nccl and openmpi major.minor.patch, the
/// others in full); a manifest entry that is not a version ("openmpi": "from efa_installer 1.36.0") or a
/// component the node has no source for (cudnn, enroot, ...) is not compared. The manifests `pcdino ami`
/// writes give Open MPI as "from efa_installer X": only a manifest with its version number compares it.
struct ManifestComparison {
  std::string image;                 ///< the manifest's "name"
  std::vector<std::string> matched;  ///< "nccl 2.21.5"
  std::vector<std::string>
      mismatched;  ///< "nccl: image 2.21.5, node 2.18.3" or "cuda: image 12.4.1, node none"
};

/// Compares the manifest text `manifest_json` (read from `path`, named in errors) with `node`
/// (image_versions()); the GPU stack (nvidia_driver, cuda, nccl) only when `has_gpus` (one image may serve
/// GPU and CPU queues). Throws DataError naming `path` when it is not JSON with a "components" object.
ManifestComparison compare_manifest(const std::string& manifest_json, const std::string& path,
                                    const std::map<std::string, std::string>& node, bool has_gpus = true);

/// The names of `names` that are unset or empty in the environment `getenv` reads.
std::vector<std::string> missing_variables(const std::vector<std::string>& names,
                                           const std::function<const char*(const char*)>& getenv);

/// In a Slurm job (SLURM_JOB_ID set in `getenv`): whether Slurm gave it GPUs of this node, as its gres/gpu
/// plugin writes them in the environment: in a step (SLURM_STEP_ID set) SLURM_STEP_GPUS (their global
/// indices) or SLURM_GPUS_ON_NODE (their count; Slurm 21.08 on); outside one SLURM_JOB_GPUS or
/// SLURM_GPUS_ON_NODE (a step's tasks inherit the batch script's SLURM_JOB_GPUS, which is the batch
/// node's). nullopt outside a Slurm job. A job given none may still see the node's GPUs (cgroup.conf's
/// ConstrainDevices is off by default, and in ParallelCluster's), or see none where devices are constrained.
std::optional<bool> slurm_job_has_gpus(const std::function<const char*(const char*)>& getenv);

/// Runs `probe` on a thread of its own and waits at most `seconds` for it: nullopt if it has not returned
/// by then (the thread is left to finish on its own; a probe stuck on a dead filesystem cannot be
/// cancelled). An exception from `probe` is rethrown.
template <typename T>
std::optional<T> within(double seconds, std::function<T()> probe);

// The probe's result travels through a shared state that outlives this call, so that a detached thread
// finishing late writes into memory it still owns.
template <typename T>
std::optional<T> within(double seconds, std::function<T()> probe) {
  auto promise = std::make_shared<std::promise<T>>();
  auto result = promise->get_future();
  std::thread([promise, probe = std::move(probe)] {
    try {
      promise->set_value(probe());
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready)
    return std::nullopt;
  return result.get();
}

}  // namespace pcdino::doctor
