// Collectives over the ranks of a training job, with two backends behind one interface (issue #5): MPI
// for CPU tensors and NCCL for CUDA tensors (compiled when CUDA and NCCL are found; the NCCL unique id
// travels over MPI). The gradient fusion that uses them is in fusion.hpp.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace pcdino {
class MpiWorld;
}

namespace pcdino::train {

enum class ReduceOp { kSum, kAverage };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi" or "nccl".
  virtual std::string backend() const = 0;

  /// Reduces each tensor in place over all ranks (every rank passes tensors of the same shapes and
  /// dtypes, in the same order). Tensors must be contiguous, on this backend's device, of float32,
  /// float64, bfloat16 (NCCL) or int64. Blocks until the results are usable on the caller's stream.
  /// Throws std::invalid_argument for a tensor it cannot reduce, Error (kSoftware) naming the
  /// backend's error.
  virtual void allreduce(std::vector<torch::Tensor>& tensors, ReduceOp op) = 0;

  /// Overwrites each tensor with rank `root`'s.
  virtual void broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;

  /// Every rank's `tensor` ([N, ...], the same shape everywhere) stacked in rank order: [size * N, ...].
  virtual torch::Tensor allgather(const torch::Tensor& tensor) = 0;

  virtual void barrier() = 0;

  /// Starts reducing `flat` (one contiguous buffer, as allreduce) in place and returns without waiting:
  /// MPI on a communication thread (if MPI provides MPI_THREAD_SERIALIZED; else at once), NCCL on the
  /// backend's own CUDA stream after the work already queued on the caller's. Reductions run in the
  /// order they were started, which must be the same on every rank. No other call of this communicator
  /// until wait_pending().
  virtual void start_allreduce(torch::Tensor flat, ReduceOp op) = 0;

  /// Waits for every started reduction (MPI), or makes the caller's stream wait for them (NCCL); rethrows
  /// the first error of one.
  virtual void wait_pending() = 0;

  /// Whether these collectives may be captured in a CUDA graph (StepGraph): NCCL from 2.9.6 on with CUDA
  /// >= 11.3
  /// ("Using NCCL with CUDA Graphs", NCCL user guide), queued after the caller's current stream (a build
  /// whose LibTorch has CUDA); never MPI, which reduces on the host.
  virtual bool graph_capturable() const { return false; }
  /// What graph_capturable() depends on, for a message ("NCCL 2.28.9", say).
  virtual std::string version() const { return backend(); }
};

/// An uninitialised tensor for allgather's result: [size * N, ...] for `tensor` [N, ...] (a scalar counts
/// as [1]), with its dtype and device.
torch::Tensor allgather_result(const torch::Tensor& tensor, int size);

/// The MPI backend on `world` (CPU tensors). The world must outlive it.
std::unique_ptr<Communicator> make_mpi_communicator(const MpiWorld& world);

/// The NCCL backend on CUDA device `device` (one rank per GPU), its unique id broadcast from rank 0 over
/// `world`. Throws Error (kUnavailable) if this build has no NCCL, ConfigError if device is not CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(const MpiWorld& world, const torch::Device& device);

/// NCCL for a CUDA device, MPI for the CPU.
std::unique_ptr<Communicator> make_communicator(const MpiWorld& world, const torch::Device& device);

}  // namespace pcdino::train
