// Horovod-style gradient synchronisation for data-parallel training (issue #5): gradients are packed into
// fusion buffers in reverse registration order (the order backward produces them), each buffer's
// allreduce starts as soon as its last gradient is ready (an autograd hook per parameter), on the
// communicator's thread or stream, so that communication overlaps the rest of backward; buffers start in
// index order on every rank. finish() waits, then writes the averages into each parameter's .grad.
// Follows horovod/torch/optimizer.py (_DistributedOptimizer: hooks, fusion threshold) and PyTorch DDP's
// bucketing (torch/csrc/distributed/c10d/reducer.cpp: a small first bucket).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "pcdino/train/comm.hpp"

namespace pcdino::train {

struct FusionOptions {
  /// Bytes per fusion buffer: Horovod's HOROVOD_FUSION_THRESHOLD default (128 MiB since 0.21).
  std::size_t threshold_bytes = 128ULL << 20;
  /// Bytes of the first buffer (the last layers' gradients, ready first); 0 = threshold_bytes. PyTorch
  /// DDP uses 1 MiB here and 25 MiB for the others.
  std::size_t first_bucket_bytes = 0;
};

class GradientFusion {
 public:
  struct Bucket {
    std::vector<std::size_t> params;  ///< indices into the parameter list, in the order packed
    std::vector<int64_t> offsets;     ///< element offset of each in `flat`
    torch::Tensor flat;               ///< [sum of numel], the parameters' dtype and device
    std::size_t ready = 0;            ///< gradients copied in this step
    bool started = false;
  };

  /// `params`: the parameters that train (requires_grad), in registration order; they must share one
  /// device. Buffers never mix dtypes. Throws std::invalid_argument for an empty list or mixed devices.
  GradientFusion(Communicator& comm, std::vector<torch::Tensor> params, const FusionOptions& options = {});

  /// Registers one autograd hook per parameter: it copies the gradient into its buffer and starts the
  /// buffer's allreduce when complete and every earlier buffer has started.
  void attach();

  /// After backward(): buffers whose gradients never came (a parameter unused this step) start with zeros
  /// there, every reduction is waited for, and each parameter's .grad becomes the average over ranks.
  /// Resets for the next step.
  void finish();

  /// After a step that failed between its first gradient and finish() (a CUDA graph's capture that
  /// threw, say): waits for the reductions started (with NCCL, joins its stream back to the caller's, as
  /// a capture must before it ends) and forgets the step's gradients, so that the next step packs and
  /// reduces every buffer again, as the other ranks do. Never throws: the step's own error is the one to
  /// report.
  void abandon() noexcept;

  /// Without hooks: packs the current .grad of every parameter, reduces buffer by buffer, writes back
  /// (the non-overlapped path; also what the benchmark compares).
  void reduce_now();

  const std::vector<Bucket>& buckets() const { return buckets_; }

  /// Host seconds finish() and reduce_now() spent waiting for the reductions since the last call (the
  /// exposed allreduce time; with NCCL only the stream ordering, near 0), and resets them.
  double take_wait_seconds() {
    const double s = wait_seconds_;
    wait_seconds_ = 0;
    return s;
  }

 private:
  void on_gradient(std::size_t param, const torch::Tensor& grad);
  void start_ready_buckets();
  void write_back();  // waits for the reductions, copies the averages into .grad, resets

  Communicator& comm_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_, slot_of_;
  std::vector<bool> arrived_;
  std::size_t next_to_start_ = 0;
  double wait_seconds_ = 0;
};

}  // namespace pcdino::train
