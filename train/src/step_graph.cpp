#include "pcdino/train/step_graph.hpp"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <string>

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

#include <memory>
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

// A capture that failed after it began, and whose capture could not be ended cleanly: PyTorch's allocator
// and CUDA generator are then left in capture state, and no eager step can follow.
struct BrokenCapture : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

struct StepGraph::Impl {
  c10::DeviceIndex device;
  int warmup;
  int runs = 0;  // since the last reset
  c10::cuda::CUDAStream side;
  std::optional<at::cuda::CUDAGraph> graph;  // captured

  Impl(c10::DeviceIndex d, int w) : device(d), warmup(w), side(c10::cuda::getStreamFromPool(false, d)) {}

  // `body` on the side stream, ordered after and before the caller's stream.
  void on_side_stream(const std::function<void()>& body, bool capture) {
    const auto caller = c10::cuda::getCurrentCUDAStream(device);
    wait(side, caller);
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      const NoAutocastCache no_cache;
      if (capture) {
        // As torch.cuda.graph does: the warm-up's blocks and an earlier epoch's graph pool go back to
        // the device before this capture allocates its own.
        c10::cuda::device_synchronize();
        c10::cuda::CUDACachingAllocator::emptyCache();
        graph.emplace();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
        // Thread-local: the loader threads' pinned-memory calls (cudaHostAlloc, cudaEventQuery) go on
        // during the capture, which the default global mode would make it fail on.
        graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
#else
        graph->capture_begin();
#endif
        try {
          body();
        } catch (const std::exception& e) {
          try {
            graph->capture_end();  // leaves capture mode; an invalidated capture throws here
          } catch (const std::exception& end) {
            throw BrokenCapture(std::string(e.what()) + "; ending the capture: " + end.what());
          }
          graph.reset();
          throw;
        }
        graph->capture_end();
      } else {
        body();
      }
    }
    wait(caller, side);
  }
};

StepGraph::StepGraph(const torch::Device& device, int warmup) {
  if (!device.is_cuda()) throw ConfigError("--cuda-graph: needs a CUDA device (--device)");
  // The optimizer's state and device step counts are made by an eager step, never inside the capture.
  if (warmup < 1) throw std::invalid_argument("StepGraph: at least one eager step before the capture");
  impl_ = std::make_unique<Impl>(device.has_index() ? device.index() : c10::cuda::current_device(), warmup);
}

StepGraph::~StepGraph() = default;

bool StepGraph::run(const std::function<void()>& body) {
  Impl& g = *impl_;
  if (failed_ || g.runs < g.warmup) {
    ++g.runs;
    if (failed_) {
      body();
    } else {
      g.on_side_stream(body, false);
    }
    return false;
  }
  if (!g.graph) {
    try {
      g.on_side_stream(body, true);
    } catch (const BrokenCapture& e) {
      throw Error(
          ExitCode::kSoftware,
          std::string("--cuda-graph: the step could not be captured and the capture could not be ended "
                      "(") +
              e.what() + "); PyTorch's CUDA state is left in capture: run without --cuda-graph");
    } catch (const std::exception& e) {
      failed_ = true;
      failure_ = e.what();
      spdlog::warn("--cuda-graph: the step could not be captured ({}); it runs without a graph", failure_);
      body();  // the capture ran nothing: this step's work is still to do
      return false;
    }
    spdlog::info(
        "--cuda-graph: the step is captured after {} eager steps and replayed from now on "
        "(its phases are all counted as forward)",
        g.warmup);
  }
  g.graph->replay();  // on the caller's stream; the capture itself ran nothing
  ++g.runs;
  return true;
}

void StepGraph::reset() {
  impl_->graph.reset();
  impl_->runs = 0;
}

#else

struct StepGraph::Impl {};

StepGraph::StepGraph(const torch::Device&, int) {
  throw ConfigError("--cuda-graph: this pcdino's LibTorch has no CUDA (a CPU build), so no CUDA graphs");
}

StepGraph::~StepGraph() = default;

bool StepGraph::run(const std::function<void()>& body) {
  body();
  return false;
}

void StepGraph::reset() {}

#endif

}  // namespace pcdino::train
