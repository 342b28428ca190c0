// The NCCL allreduce of `pcdino doctor` (issue #21): every GPU of every node in one NCCL communicator, one
// process per node driving all of its GPUs, measured as nccl-tests' all_reduce_perf measures it. The CUDA
// runtime and NCCL are loaded with dlopen when the check runs, so `pcdino` starts on nodes without them.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "pcdino/core/error.hpp"
#include "pcdino/doctor/bandwidth.hpp"

namespace pcdino {
class MpiWorld;
}  // namespace pcdino

namespace pcdino::doctor {

/// The libraries the check loads, by soname, tried in order.
struct GpuLibraries {
  std::vector<std::string>
      cudart;  ///< default: libcudart.so.<the CUDA major pcdino was built with>, libcudart.so
  std::vector<std::string> nccl;  ///< default: libnccl.so.2
};

/// The sonames above; empty lists when pcdino was built without nccl.h (no CUDA toolkit found).
GpuLibraries default_gpu_libraries();

/// What this process can drive: the GPUs the CUDA runtime shows it (cudaGetDeviceCount, which honours
/// CUDA_VISIBLE_DEVICES as Slurm sets it), once NCCL has loaded too (its version is the image check's).
struct GpuStack {
  bool loaded = false;     ///< the CUDA runtime and NCCL loaded (a later `error` is the runtime's)
  bool no_device = false;  ///< loaded, and the runtime sees no GPU (cudaErrorNoDevice, or a count of 0)
  int gpus = 0;            ///< 0 when `error` is set
  std::string error;       ///< why not usable: a library that does not load, or the runtime's error string
};

/// Loads the CUDA runtime and NCCL of `libraries` (dlopen, once per process; later calls reuse them) and
/// counts the GPUs. Never throws: every failure is in `error`.
GpuStack probe_gpu_stack(const GpuLibraries& libraries = default_gpu_libraries());

/// Thrown by nccl_allreduce_sweep() on every rank when some rank could not set up its GPUs: what each
/// failed rank said, by rank (the message joins them as "rank R: ...").
struct NcclSetupError : Error {
  explicit NcclSetupError(const std::string& message) : Error(ExitCode::kUnavailable, message) {}
  std::map<int, std::string> failed;
};

/// Collective over `world`: an NCCL communicator of every rank's `local_gpus` GPUs (devices 0..local_gpus-1
/// of each rank; ranks numbered node by node), then for each of `sizes` bytes an in-place ncclAllReduce
/// (float32 sum) on every GPU at once: one warm-up, then `reps` launched back to back and waited for; each
/// point's time is the slowest rank's mean, busbw = algbw x 2(n-1)/n over n = all GPUs (nccl-tests'
/// all_reduce_perf, doc/PERFORMANCE.md). The same points on every rank. Needs probe_gpu_stack() to have
/// succeeded on every rank with local_gpus > 0. Throws NcclSetupError on every rank when a rank's libraries,
/// buffers or streams cannot be set up (every rank learns it before NCCL starts), and Error when a CUDA or
/// NCCL call fails after that; a rank lost inside NCCL hangs the others, so callers run it under a watchdog.
std::vector<AllreducePoint> nccl_allreduce_sweep(const MpiWorld& world, int local_gpus,
                                                 const std::vector<std::size_t>& sizes, int reps);

/// The NCCL busbw floor (GB/s) of nodes of `instance_types` running `gpus` GPUs each (one entry per node;
/// "" = type unknown): `site` when > 0; else the published floor of their common instance type
/// (ami::nccl_busbw_threshold(): ParallelCluster's EFA test, 1 GiB on 2 nodes of all their GPUs) when every
/// node runs all of that type's GPUs (ami::gpus_per_instance()); else 0. `source` (when not null) says
/// where the floor came from, or why there is none.
double nccl_floor(double site, const std::vector<std::string>& instance_types, const std::vector<int>& gpus,
                  std::string* source);

}  // namespace pcdino::doctor
