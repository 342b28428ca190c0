#include "pcdino/train/step_graph.hpp"

#include <spdlog/spdlog.h>

#include <string>
#include <utility>

#include "pcdino/core/error.hpp"

#ifdef PCDINO_TORCH_CUDA
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

#include <optional>
#endif

namespace pcdino::train {

#ifdef PCDINO_TORCH_CUDA

namespace {

// `to` waits for the work queued on `from` so far.
void wait(const c10::cuda::CUDAStream& to, const c10::cuda::CUDAStream& from) {
  at::cuda::CUDAEvent ready;
  ready.record(from);
  ready.block(to);
}

// Autocast keeps casts of the weights between operations unless told not to; a graph must not keep
// them (PyTorch's torch.cuda.graph turns the cache off while capturing).
struct NoAutocastCache {
  bool was = at::autocast::is_autocast_cache_enabled();
  NoAutocastCache() { at::autocast::set_autocast_cache_enabled(false); }
  ~NoAutocastCache() { at::autocast::set_autocast_cache_enabled(was); }
};

// The step on a side stream of `device`, eagerly or captured with at::cuda::CUDAGraph.
class CudaGraphCapture : public GraphCapture {
 public:
  explicit CudaGraphCapture(c10::DeviceIndex device)
      : device_(device), side_(c10::cuda::getStreamFromPool(false, device)) {}

  void eager(const std::function<void()>& body) override { on_side_stream(body, false); }
  void capture(const std::function<void()>& body) override { on_side_stream(body, true); }
  void replay() override { graph_->replay(); }  // on the caller's stream
  void drop() override { graph_.reset(); }

 private:
  // `body` on the side stream, ordered after and before the caller's stream.
  void on_side_stream(const std::function<void()>& body, bool capture) {
    const auto caller = c10::cuda::getCurrentCUDAStream(device_);
    wait(side_, caller);
    {
      const c10::cuda::CUDAStreamGuard guard(side_);
      const NoAutocastCache no_cache;
      if (capture) {
        // As torch.cuda.graph does: the warm-up's blocks and an earlier epoch's graph pool go back to
        // the device before this capture allocates its own.
        c10::cuda::device_synchronize();
        c10::cuda::CUDACachingAllocator::emptyCache();
        graph_.emplace();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
        // Thread-local: the loader threads' pinned-memory calls (cudaHostAlloc, cudaEventQuery) go on
        // during the capture, which the default global mode would make it fail on.
        graph_->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
        graph_->capture_begin();
#endif
        try {
          body();
        } catch (const std::exception& e) {
          try {
            graph_->capture_end();  // leaves capture mode; an invalidated capture throws here
          } catch (const std::exception& end) {
            throw CaptureLeftOpen(std::string(e.what()) + "; ending the capture: " + end.what());
          }
          graph_.reset();
          throw;
        }
        graph_->capture_end();
      } else {
        body();
      }
    }
    wait(caller, side_);
  }

  c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
  std::optional<at::cuda::CUDAGraph> graph_;  // captured
};

std::unique_ptr<GraphCapture> make_cuda_graph_capture(const torch::Device& device) {
  if (!device.is_cuda()) throw ConfigError("--cuda-graph: needs a CUDA device (--device)");
  return std::make_unique<CudaGraphCapture>(device.has_index() ? device.index()
                                                               : c10::cuda::current_device());
}

}  // namespace

#else

namespace {

std::unique_ptr<GraphCapture> make_cuda_graph_capture(const torch::Device&) {
  throw ConfigError("--cuda-graph: this pcdino's LibTorch has no CUDA (a CPU build), so no CUDA graphs");
}

}  // namespace

#endif

StepGraph::StepGraph(const torch::Device& device, int warmup, AllRanks all_ranks)
    : StepGraph(make_cuda_graph_capture(device), warmup, std::move(all_ranks)) {}

StepGraph::StepGraph(std::unique_ptr<GraphCapture> capture, int warmup, AllRanks all_ranks)
    : capture_(std::move(capture)), warmup_(warmup), all_ranks_(std::move(all_ranks)) {
  if (!capture_) throw std::invalid_argument("StepGraph: no capture");
  // The optimizer's state and device step counts are made by an eager step, never inside the capture.
  if (warmup < 1) throw std::invalid_argument("StepGraph: at least one eager step before the capture");
}

StepGraph::~StepGraph() = default;

bool StepGraph::run(const std::function<void()>& body) {
  if (failed_) {
    body();
    return false;
  }
  if (runs_ < warmup_) {
    ++runs_;
    capture_->eager(body);
    return false;
  }
  if (!captured_) {
    std::string why;
    bool captured = true;
    try {
      capture_->capture(body);
    } catch (const CaptureLeftOpen& e) {
      throw Error(ExitCode::kSoftware,
                  std::string("--cuda-graph: the step could not be captured and the capture could not be "
                              "ended (") +
                      e.what() + "); PyTorch's CUDA state is left in capture: run without --cuda-graph");
    } catch (const std::exception& e) {
      captured = false;
      why = e.what();
    }
    // NCCL: whether a collective is captured must be the same on every rank.
    if (all_ranks_ && !all_ranks_(captured) && captured) {
      capture_->drop();
      captured = false;
      why = "another rank could not capture its step";
    }
    if (!captured) {
      failed_ = true;
      failure_ = why;
      spdlog::warn("--cuda-graph: the step could not be captured ({}); it runs without a graph", failure_);
      body();  // the capture ran nothing: this step's work is still to do
      return false;
    }
    captured_ = true;
    spdlog::info(
        "--cuda-graph: the step is captured after {} eager steps and replayed from now on "
        "(its phases are all counted as forward)",
        warmup_);
  }
  capture_->replay();
  ++runs_;
  return true;
}

}  // namespace pcdino::train
