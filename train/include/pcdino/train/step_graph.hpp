// A training step captured once as a CUDA graph and replayed (issue #22): at DINO's model sizes a GPU step
// is bound by its ~thousands of kernel launches, and a graph replays them all in one launch.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace pcdino::train {

/// The CUDA side of a StepGraph: run a step eagerly, capture it, replay the capture, forget it. The CUDA
/// one is made by StepGraph's device constructor (only against a LibTorch with CUDA); tests drive the
/// StepGraph's warm-up, failure and agreement rules with one of their own.
class GraphCapture {
 public:
  virtual ~GraphCapture() = default;
  /// `body` now, on the capture's stream, ordered after the caller's work and before its later work.
  virtual void eager(const std::function<void()>& body) = 0;
  /// Records `body` without running it. Throws what the body or the capture threw when the capture could
  /// be ended (nothing is kept; eager steps may follow), CaptureLeftOpen when it could not.
  virtual void capture(const std::function<void()>& body) = 0;
  /// Runs the recorded step once, on the caller's stream.
  virtual void replay() = 0;
  /// Forgets the recorded step (and frees its memory pool).
  virtual void drop() = 0;
};

/// A capture that failed and could not be ended: PyTorch's allocator and CUDA generator are left in
/// capture state, so no eager step can follow.
struct CaptureLeftOpen : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs a step body as PyTorch's whole-network capture does (torch.cuda.graphs.make_graphed_callables /
/// the CUDA Graphs section of the PyTorch CUDA semantics notes): the first `warmup` runs eagerly on a
/// side stream (lazy initialisation, NCCL's connections and the allocator's pools settle), the next is
/// captured on that stream with at::cuda::CUDAGraph and replayed, and later runs only replay. The body
/// must read and write only tensors that outlive the graph at fixed addresses (static inputs the caller
/// fills before run(), device scalars for the schedules, parameters, gradients, optimizer state, the DINO
/// centre, fusion buffers, accumulators updated in place) and must not read the device from the host
/// (.item(), .cpu()).
///
/// Several ranks: the body's NCCL collectives (the gradients' allreduce, the centre's) are captured with
/// it, which NCCL allows from 2.9.6 on ("Using NCCL with CUDA Graphs", NCCL user guide) provided that every
/// rank captures the same collectives and replays its own graph of them. So every rank captures at the
/// same step, and `all_ranks` makes the outcome collective: when one rank's capture fails, every rank
/// drops its graph and runs eagerly from then on. (NCCL may exchange with the other ranks on the host
/// while it captures a collective: a rank whose capture fails before it gets there can leave the others
/// waiting inside the capture, until the trainer's --comm-timeout watchdog ends the job.)
///
/// Before the capture the device is synchronised and the allocator's cache emptied (as torch.cuda.graph
/// does); the capture is thread-local (LibTorch >= 2.1), so the loader threads may go on pinning memory.
/// A capture that fails on the host while the capture itself stays valid is ended, logged once, and the
/// body runs eagerly from then on: failed() says so. One whose capture cannot be ended (an operation the
/// capture does not allow) leaves PyTorch's allocator and CUDA generator in capture state: run() then
/// throws Error (kSoftware) telling the user to train without --cuda-graph. Not thread-safe.
class StepGraph {
 public:
  /// Given whether this rank captured its step, whether every rank did: a collective that every rank
  /// calls at the same step. Empty for one rank.
  using AllRanks = std::function<bool(bool captured)>;

  /// `device` is the CUDA device the body runs on; `warmup` >= 1 eager runs before the capture (they make
  /// the optimizer's state). Throws ConfigError when this build's LibTorch has no CUDA (no CUDA graphs)
  /// or `device` is not a CUDA device, std::invalid_argument for `warmup` < 1.
  StepGraph(const torch::Device& device, int warmup = 3, AllRanks all_ranks = {});
  /// The same rules over another GraphCapture (tests). Throws std::invalid_argument for `warmup` < 1 or
  /// no capture.
  StepGraph(std::unique_ptr<GraphCapture> capture, int warmup, AllRanks all_ranks = {});
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  /// One step: `body` eagerly (warm-up, or after a failed capture), or captured and then replayed, or
  /// replayed. Work is queued on the caller's current stream's order: the caller's writes before run()
  /// (static inputs, schedules) happen before it, the caller's reads after run() see its results.
  /// Returns true when the step ran as a replay.
  bool run(const std::function<void()>& body);

  bool failed() const { return failed_; }
  /// Why the capture failed ("" when none did).
  const std::string& failure() const { return failure_; }

 private:
  std::unique_ptr<GraphCapture> capture_;
  int warmup_;
  AllRanks all_ranks_;
  int runs_ = 0;
  bool captured_ = false;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace pcdino::train
