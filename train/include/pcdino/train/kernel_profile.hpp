// The kernel-time floor of a training step (issue #49): the GPU time of the kernels a stretch of steps
// launched, from the PyTorch profiler (torch.profiler with ProfilerActivity.CUDA: Kineto over CUPTI), the
// total Nsight Systems' kernel summary gives. A step whose kernels run back to back, the GPU never waiting
// for the host, takes that long; how far a step's time is above it is what launching (and CUDA graphs,
// which remove the launches) can win.
#pragma once

namespace pcdino::train {

/// What the profiler recorded between KernelProfile's start and stop().
struct KernelTotals {
  /// Seconds of the GPU's activities: kernels, memory copies and memory sets, each its duration on the
  /// device, summed (activities on several streams that overlap count twice). 0 without `cuda`.
  double device_seconds = 0;
  long long kernels = 0;         ///< kernels run (a replayed CUDA graph's count one by one)
  long long host_operators = 0;  ///< CPU operators recorded beside them (aten::mm, ...)
};

/// Records the CPU operators and, with `cuda`, the GPU activities of this process from construction to
/// stop(). Its overhead is on the host (each launch is noted), not in the kernels' durations: time the
/// steps in another stretch. One at a time per process (the profiler is process-wide).
class KernelProfile {
 public:
  /// Starts the profiler. `cuda`: also the GPU's activities (a CUDA build of LibTorch; without CUPTI the
  /// profiler records none, and kernels stays 0). Throws Error (kSoftware) if a profiler already runs.
  explicit KernelProfile(bool cuda);
  ~KernelProfile();  ///< stops the profiler if stop() was not called
  KernelProfile(const KernelProfile&) = delete;
  KernelProfile& operator=(const KernelProfile&) = delete;

  /// Waits for the GPU (with `cuda`), stops the profiler and adds up what it recorded. Once.
  KernelTotals stop();

 private:
  bool cuda_;
  bool running_ = true;
};

}  // namespace pcdino::train
