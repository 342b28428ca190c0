// What `pcdino doctor` measures on one node (issue #21): each probe is a plain function of this node,
// run by the doctor on every node of an allocation under a time limit. None needs MPI.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
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
};

/// Writes `bytes` to a new file in `dir` (a name of this host and process), fsyncs it, asks the kernel to
/// drop it from the page cache (posix_fadvise DONTNEED; a network filesystem may still serve it from its
/// own cache), reads it back, checks the content and removes it. Never throws: every failure is in `error`.
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
  int cpus = 0;                       ///< CPUTot
  std::uint64_t real_memory_mib = 0;  ///< RealMemory (MiB)
  int gpus = 0;                       ///< the counts of every gpu entry of Gres (gpu:4, gpu:a100:8(S:0-1))
};

/// Parses one line of `scontrol show node -o`. Throws DataError naming the line when NodeName or CPUTot
/// is missing.
SlurmNodeView parse_scontrol_node(const std::string& line);

/// The libfabric providers fi_getinfo reports on this node (each named once, in libfabric's order), or
/// the error fi_getinfo gave as its only element prefixed "error: ".
std::vector<std::string> fabric_providers();

/// The names of `names` that are unset or empty in the environment `getenv` reads.
std::vector<std::string> missing_variables(const std::vector<std::string>& names,
                                           const std::function<const char*(const char*)>& getenv);

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
