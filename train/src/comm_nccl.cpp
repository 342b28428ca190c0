// The NCCL backend: CUDA tensors, one rank per GPU, collectives on a stream of its own that is ordered
// after the caller's current stream with CUDA events (so a bucket's allreduce overlaps the rest of
// backward; under a CUDA graph's capture the events bring that stream into the capture).
// Built only when CUDA and NCCL are found (PCDINO_WITH_NCCL); the unique id travels over MPI.
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/comm.hpp"

#ifdef PCDINO_WITH_NCCL
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

#ifdef PCDINO_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif
#endif

namespace pcdino::train {

#ifdef PCDINO_WITH_NCCL
namespace {

void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw Error(ExitCode::kSoftware, std::string("CUDA ") + what + ": " + cudaGetErrorString(rc));
}

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw Error(ExitCode::kSoftware, std::string("NCCL ") + what + ": " + ncclGetErrorString(rc));
}

ncclDataType_t nccl_type(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat:
      return ncclFloat32;
    case torch::kDouble:
      return ncclFloat64;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kHalf:
      return ncclFloat16;
    case torch::kLong:
      return ncclInt64;
    default:
      throw std::invalid_argument(std::string("NCCL backend: cannot reduce ") +
                                  c10::toString(t.scalar_type()));
  }
}

// Where LibTorch queues the caller's kernels: its current stream on the device (a CUDA graph's capture
// stream, or the autograd engine's stream for a gradient hook). Without LibTorch's CUDA API, the legacy
// default stream, LibTorch's unless told otherwise.
cudaStream_t caller_stream(int device) {
#ifdef PCDINO_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
#else
  (void)device;
  return cudaStreamLegacy;  // named, whatever nullptr means in this build
#endif
}

// What capturing NCCL's collectives in a CUDA graph needs: NCCL 2.9.6 (its release notes: "Add support
// for CUDA graphs"; PyTorch's CUDA notes ask the same for DDP) and CUDA 11.3, runtime and driver (NCCL
// user guide, "Using NCCL with CUDA Graphs").
constexpr int kFirstCapturableNccl = 20906;  // NCCL_VERSION(2, 9, 6)
constexpr int kFirstCapturableCuda = 11030;  // CUDA 11.3, as cudaRuntimeGetVersion gives it

// "major.minor" of a CUDA version code (1000 * major + 10 * minor).
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const MpiWorld& world, int device) : world_(world), device_(device) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id{};
    if (world.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    check_nccl(ncclCommInitRank(&comm_, world.size(), id, world.rank()), "ncclCommInitRank");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }

  ~NcclCommunicator() override {
    cudaEventDestroy(ready_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }
  std::string backend() const override { return "nccl"; }

  void allreduce(std::vector<torch::Tensor>& tensors, ReduceOp op) override {
    between_caller([&] {
      grouped([&] {
        for (auto& t : tensors) launch_allreduce(t, op);
      });
    });
  }

  void start_allreduce(torch::Tensor flat, ReduceOp op) override {
    after_caller();
    try {
      launch_allreduce(flat, op);
    } catch (...) {
      rejoin_quietly();
      throw;
    }
  }

  void wait_pending() override { before_caller(); }

  bool graph_capturable() const override {
#ifdef PCDINO_TORCH_CUDA
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    return nccl_version() >= kFirstCapturableNccl && runtime >= kFirstCapturableCuda &&
           driver >= kFirstCapturableCuda;
#else
    return false;           // the caller's stream is not known
#endif
  }

  std::string version() const override {
    // NCCL_VERSION's code: major * 1000 + minor * 100 + patch up to 2.8, major * 10000 + ... from 2.9.
    const int v = nccl_version(), major_unit = v < 10000 ? 1000 : 10000;
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    return "NCCL " + std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
           std::to_string(v % 100) + ", CUDA runtime " + cuda_version_text(runtime) + ", driver " +
           cuda_version_text(driver);
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    between_caller([&] {
      grouped([&] {
        for (auto& t : tensors) {
          check(t);
          check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(),
                                   static_cast<std::size_t>(t.numel() * t.element_size()), ncclUint8, root,
                                   comm_, stream_),
                     "ncclBroadcast");
        }
      });
    });
  }

  torch::Tensor allgather(const torch::Tensor& tensor) override {
    const auto t = tensor.contiguous();
    check(t);
    auto out = allgather_result(t, size());
    between_caller([&] {
      check_nccl(
          ncclAllGather(t.data_ptr(), out.data_ptr(), static_cast<std::size_t>(t.numel() * t.element_size()),
                        ncclUint8, comm_, stream_),
          "ncclAllGather");
    });
    return out;
  }

  void barrier() override {
    auto one = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA, device_));
    std::vector<torch::Tensor> v{one};
    allreduce(v, ReduceOp::kSum);
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  static int nccl_version() {
    int v = 0;
    check_nccl(ncclGetVersion(&v), "ncclGetVersion");
    return v;
  }

  void check(const torch::Tensor& t) const {
    if (!t.is_cuda() || t.get_device() != device_ || !t.is_contiguous()) {
      throw std::invalid_argument("NCCL backend: tensors must be contiguous on cuda:" +
                                  std::to_string(device_));
    }
  }

  void launch_allreduce(torch::Tensor& t, ReduceOp op) {
    check(t);
    check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<std::size_t>(t.numel()), nccl_type(t),
                             op == ReduceOp::kAverage ? ncclAvg : ncclSum, comm_, stream_),
               "ncclAllReduce");
  }

  // Our stream waits for what the caller queued so far (the gradients being reduced)...
  void after_caller() {
    check_cuda(cudaEventRecord(ready_, caller_stream(device_)), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
  }

  // ... and the caller's stream waits for our collectives before it reads their results.
  void before_caller() {
    check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(caller_stream(device_), done_, 0), "cudaStreamWaitEvent");
  }

  // before_caller() on the way out of a failed call: a CUDA graph's capture ends cleanly only when every
  // stream it drew in (ours, by after_caller) has joined the capture's stream again.
  void rejoin_quietly() noexcept {
    if (cudaEventRecord(done_, stream_) == cudaSuccess) {
      try {
        cudaStreamWaitEvent(caller_stream(device_), done_, 0);
      } catch (...) {  // the first error is the one to report
      }
    }
  }

  // `enqueue` on our stream between after_caller() and before_caller(), rejoining also when it throws.
  template <typename Enqueue>
  void between_caller(Enqueue&& enqueue) {
    after_caller();
    try {
      enqueue();
    } catch (...) {
      rejoin_quietly();
      throw;
    }
    before_caller();
  }

  // `launches` as one NCCL group, the group ended also when one throws.
  template <typename Launches>
  static void grouped(Launches&& launches) {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    try {
      launches();
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  const MpiWorld& world_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const MpiWorld& world, const torch::Device& device) {
  if (!device.is_cuda()) throw ConfigError("the NCCL backend needs a CUDA device, not " + device.str());
  return std::make_unique<NcclCommunicator>(world, device.index());
}

#else

std::unique_ptr<Communicator> make_nccl_communicator(const MpiWorld&, const torch::Device&) {
  throw Error(ExitCode::kUnavailable,
              "this pcdino was built without NCCL (no CUDA toolkit with nccl.h found): GPU training across "
              "ranks is not available; rebuild on a node with CUDA and NCCL");
}

#endif

}  // namespace pcdino::train
