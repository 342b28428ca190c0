// A training step captured once as a CUDA graph and replayed (issue #22): at DINO's model sizes a GPU step
// is bound by its ~thousands of kernel launches, and a graph replays them all in one launch.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

namespace pcdino::train {

/// Runs a step body as PyTorch's whole-network capture does (torch.cuda.graphs.make_graphed_callables /
/// the CUDA Graphs section of the PyTorch CUDA semantics notes): the first `warmup` runs eagerly on a
/// side stream (lazy initialisation and the allocator's pools settle), the next is captured on that
/// stream with at::cuda::CUDAGraph and replayed, and later runs only replay. The body must read and
/// write only tensors that outlive the graph at fixed addresses (static inputs the caller fills before
/// run(), device scalars for the schedules, parameters, gradients, optimizer state, the DINO centre,
/// accumulators updated in place) and must not read the device from the host (.item(), .cpu()).
///
/// Before the capture the device is synchronised and the allocator's cache emptied (as torch.cuda.graph
/// does); the capture is thread-local (LibTorch >= 2.1), so the loader threads may go on pinning memory.
/// A capture that fails on the host while the capture itself stays valid is ended, logged once, and the
/// body runs eagerly from then on: failed() says so. One whose capture cannot be ended (an operation the
/// capture does not allow) leaves PyTorch's allocator and CUDA generator in capture state: run() then
/// throws Error (kSoftware) telling the user to train without --cuda-graph. Not thread-safe.
class StepGraph {
 public:
  /// `device` is the CUDA device the body runs on; `warmup` >= 1 eager runs before each capture (they make
  /// the optimizer's state). Throws ConfigError when this build's LibTorch has no CUDA (no CUDA graphs)
  /// or `device` is not a CUDA device, std::invalid_argument for `warmup` < 1.
  StepGraph(const torch::Device& device, int warmup = 3);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// One step: `body` eagerly (warm-up, or after a failed capture), or captured and then replayed, or
  /// replayed. Work is queued on the caller's current stream's order: the caller's writes before run()
  /// (static inputs, schedules) happen before it, the caller's reads after run() see its results.
  /// Returns true when the step ran as a replay.
  bool run(const std::function<void()>& body);

  /// Forgets the graph: the next runs warm up and capture again (after the body changes: a new epoch's
  /// teacher temperature, say).
  void reset();

  bool failed() const { return failed_; }
  /// Why the last capture failed ("" when none did).
  const std::string& failure() const { return failure_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // the CUDA parts (a CPU build has none)
  bool failed_ = false;
  std::string failure_;
};

}  // namespace pcdino::train
