// The CUDA runtime and NCCL come in through dlopen: `pcdino` links neither, and a node without them is told
// so instead of failing to start. Their prototypes come from the headers found at build time
// (PCDINO_DOCTOR_NCCL), so each pointer has the library's own type.
#include "pcdino/doctor/nccl.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>

#include "pcdino/ami/compat.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"

#ifdef PCDINO_DOCTOR_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace pcdino::doctor {

double nccl_floor(double site, const std::vector<std::string>& instance_types, const std::vector<int>& gpus,
                  std::string* source) {
  std::string why;
  double floor = 0;
  std::vector<std::string> types = instance_types;
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  const int whole = types.size() == 1 ? ami::gpus_per_instance(types.front()) : 0;
  if (site > 0) {
    floor = site, why = "doctor.min_nccl_busbw_gbps";
  } else if (types.empty() || types.front().empty()) {
    why = "Slurm's features name no instance type for every node";
  } else if (types.size() > 1) {
    why = "the nodes are of several instance types";
  } else if ((floor = ami::nccl_busbw_threshold(types.front(), &why)) <= 0) {
    why = "no floor is published for " + types.front();
  } else if (std::any_of(gpus.begin(), gpus.end(), [&](int g) { return g != whole; })) {
    floor = 0;
    why = fmt::format("the published floor of {} is for nodes running all {} of its GPUs", types.front(),
                      whole);
  } else {
    why = types.front() + ": " + why;
  }
  if (source != nullptr) *source = why;
  return floor;
}

#ifdef PCDINO_DOCTOR_NCCL

namespace {

// The calls the check makes, each with the type its header declares.
struct Api {
  decltype(&::cudaGetDeviceCount) get_device_count = nullptr;
  decltype(&::cudaSetDevice) set_device = nullptr;
  cudaError_t (*malloc)(void**, std::size_t) = nullptr;  // the C call; cuda_runtime.h adds template overloads
  decltype(&::cudaFree) free = nullptr;
  decltype(&::cudaMemsetAsync) memset_async = nullptr;
  decltype(&::cudaStreamCreateWithFlags) stream_create = nullptr;
  decltype(&::cudaStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cudaStreamDestroy) stream_destroy = nullptr;
  decltype(&::cudaGetErrorString) cuda_error = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclGetErrorString) nccl_error = nullptr;

  void cuda(cudaError_t rc, const char* what) const {
    if (rc != cudaSuccess) throw Error(ExitCode::kUnavailable, std::string(what) + ": " + cuda_error(rc));
  }
  void nccl(ncclResult_t rc, const char* what) const {
    if (rc != ncclSuccess) throw Error(ExitCode::kUnavailable, std::string(what) + ": " + nccl_error(rc));
  }

  // `calls` between ncclGroupStart and ncclGroupEnd; the group is closed even when one throws (a group left
  // open would turn the clean-up's aborts into queued calls that never run).
  template <typename Calls>
  void grouped(Calls calls) const {
    nccl(group_start(), "ncclGroupStart");
    try {
      calls();
    } catch (...) {
      group_end();
      throw;
    }
    nccl(group_end(), "ncclGroupEnd");
  }
};

// The first of `names` that loads (kept loaded for the life of the process), or nullptr with `error` set.
void* open_first(const std::vector<std::string>& names, std::string& error) {
  std::string tried;
  for (const auto& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + (why != nullptr ? std::string(why) : name);
  }
  error = names.empty() ? "no library to load" : "cannot load " + names.front() + " (" + tried + ")";
  return nullptr;
}

template <typename Fn>
bool bind(void* handle, const char* symbol, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (fn == nullptr && error.empty()) error = std::string("no symbol ") + symbol;
  return fn != nullptr;
}

// Fills `api` from `libraries`; "" when every call was found, else why not.
std::string load(const GpuLibraries& libraries, Api& api) {
  std::string error;
  void* cudart = open_first(libraries.cudart, error);
  if (cudart == nullptr) return error;
  void* nccl = open_first(libraries.nccl, error);
  if (nccl == nullptr) return error;
  bind(cudart, "cudaGetDeviceCount", api.get_device_count, error);
  bind(cudart, "cudaSetDevice", api.set_device, error);
  bind(cudart, "cudaMalloc", api.malloc, error);
  bind(cudart, "cudaFree", api.free, error);
  bind(cudart, "cudaMemsetAsync", api.memset_async, error);
  bind(cudart, "cudaStreamCreateWithFlags", api.stream_create, error);
  bind(cudart, "cudaStreamSynchronize", api.stream_synchronize, error);
  bind(cudart, "cudaStreamDestroy", api.stream_destroy, error);
  bind(cudart, "cudaGetErrorString", api.cuda_error, error);
  bind(nccl, "ncclGetUniqueId", api.get_unique_id, error);
  bind(nccl, "ncclCommInitRank", api.comm_init_rank, error);
  bind(nccl, "ncclAllReduce", api.all_reduce, error);
  bind(nccl, "ncclGroupStart", api.group_start, error);
  bind(nccl, "ncclGroupEnd", api.group_end, error);
  bind(nccl, "ncclCommDestroy", api.comm_destroy, error);
  bind(nccl, "ncclCommAbort", api.comm_abort, error);
  bind(nccl, "ncclGetErrorString", api.nccl_error, error);
  return error;
}

// One GPU of this rank: its buffer, stream and place in the communicator. Released in reverse; a sweep that
// failed aborts its communicators rather than waiting for peers that may be gone.
struct Gpu {
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
};

struct Gpus {
  const Api& api;
  std::vector<Gpu> gpus;
  bool failed = true;

  ~Gpus() {
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      api.set_device(static_cast<int>(i));
      if (gpus[i].comm != nullptr) (failed ? api.comm_abort : api.comm_destroy)(gpus[i].comm);
      if (gpus[i].stream != nullptr) api.stream_destroy(gpus[i].stream);
      if (gpus[i].buffer != nullptr) api.free(gpus[i].buffer);
    }
  }
};

}  // namespace

GpuLibraries default_gpu_libraries() {
  // The runtime's soname carries its major version (libcudart.so.12), with a ".0" up to CUDA 11: the build's
  // first, then the older ones a node's driver may be limited to (the calls used are the same in all), then
  // the development link.
  GpuLibraries libraries{{}, {"libnccl.so.2"}};
  for (int major = CUDART_VERSION / 1000; major >= 11; --major)
    libraries.cudart.push_back(fmt::format(major >= 12 ? "libcudart.so.{}" : "libcudart.so.{}.0", major));
  libraries.cudart.emplace_back("libcudart.so");
  return libraries;
}

GpuStack probe_gpu_stack(const GpuLibraries& libraries) {
  GpuStack stack;
  Api api;
  stack.error = load(libraries, api);
  if (!stack.error.empty()) return stack;
  stack.loaded = true;
  const cudaError_t rc = api.get_device_count(&stack.gpus);
  if (rc != cudaSuccess) {
    stack.gpus = 0;
    stack.error = std::string("cudaGetDeviceCount: ") + api.cuda_error(rc);
  }
  stack.no_device = rc == cudaErrorNoDevice || (rc == cudaSuccess && stack.gpus == 0);
  return stack;
}

std::vector<AllreducePoint> nccl_allreduce_sweep(const MpiWorld& world, int local_gpus,
                                                 const std::vector<std::size_t>& sizes, int reps) {
  const MPI_Comm comm = MPI_COMM_WORLD;
  const int rank = world.rank();
  Api api;
  std::string error = load(default_gpu_libraries(), api);
  std::size_t largest = sizeof(float);
  for (const std::size_t bytes : sizes) largest = std::max(largest, bytes / sizeof(float) * sizeof(float));
  Gpus gpus{api, {}};
  ncclUniqueId id{};
  // Buffers, streams and the communicator's id first: every rank learns whether all could before NCCL
  // starts, where one missing rank would hang the rest.
  if (error.empty()) {
    try {
      if (rank == 0) api.nccl(api.get_unique_id(&id), "ncclGetUniqueId");
      gpus.gpus.resize(static_cast<std::size_t>(local_gpus));
      for (int i = 0; i < local_gpus; ++i) {
        Gpu& g = gpus.gpus[static_cast<std::size_t>(i)];
        api.cuda(api.set_device(i), "cudaSetDevice");
        api.cuda(api.malloc(&g.buffer, largest), "cudaMalloc");
        api.cuda(api.stream_create(&g.stream, cudaStreamNonBlocking), "cudaStreamCreate");
        api.cuda(api.memset_async(g.buffer, 0, largest, g.stream), "cudaMemsetAsync");
      }
    } catch (const std::exception& e) {  // any failure must still reach the agreement below
      error = e.what();
    }
  }
  if (error.empty() && local_gpus <= 0) error = "NCCL allreduce: no GPU on this node";
  // Every rank learns every rank's error (empty: ready), so that all stop together, naming who failed.
  const std::vector<std::string> errors = world.allgather(error);
  std::map<int, std::string> failed;
  std::string text;
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    failed[static_cast<int>(r)] = errors[r];
    text += (text.empty() ? "" : "; ") + fmt::format("rank {}: {}", r, errors[r]);
  }
  if (!failed.empty()) {
    NcclSetupError thrown(text);
    thrown.failed = std::move(failed);
    throw thrown;
  }
  int first = 0, total = 0;
  MPI_Exscan(&local_gpus, &first, 1, MPI_INT, MPI_SUM, comm);
  if (rank == 0) first = 0;  // MPI_Exscan leaves rank 0's result undefined
  MPI_Allreduce(&local_gpus, &total, 1, MPI_INT, MPI_SUM, comm);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);

  // One process, several GPUs: the inits (and each launch below) are grouped, as NCCL requires.
  api.grouped([&] {
    for (int i = 0; i < local_gpus; ++i) {
      api.cuda(api.set_device(i), "cudaSetDevice");
      api.nccl(api.comm_init_rank(&gpus.gpus[static_cast<std::size_t>(i)].comm, total, id, first + i),
               "ncclCommInitRank");
    }
  });

  std::vector<AllreducePoint> points;
  for (const std::size_t bytes : sizes) {
    const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
    const auto launch = [&] {
      api.grouped([&] {
        for (const Gpu& g : gpus.gpus)
          api.nccl(api.all_reduce(g.buffer, g.buffer, count, ncclFloat32, ncclSum, g.comm, g.stream),
                   "ncclAllReduce");
      });
    };
    const auto wait = [&] {
      for (const Gpu& g : gpus.gpus) api.cuda(api.stream_synchronize(g.stream), "cudaStreamSynchronize");
    };
    points.push_back(time_allreduce(comm, count * sizeof(float), total, reps, launch, wait));
  }
  gpus.failed = false;
  return points;
}

#else

GpuLibraries default_gpu_libraries() {
  return {};
}

GpuStack probe_gpu_stack(const GpuLibraries&) {
  GpuStack stack;
  stack.error = "this pcdino was built without nccl.h (no CUDA toolkit with NCCL found): no NCCL check";
  return stack;
}

std::vector<AllreducePoint> nccl_allreduce_sweep(const MpiWorld&, int, const std::vector<std::size_t>&, int) {
  throw Error(ExitCode::kUnavailable, probe_gpu_stack({}).error);
}

#endif

}  // namespace pcdino::doctor
