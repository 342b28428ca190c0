// The MPI world of a stage: one process per rank, launched by `srun --mpi=pmix` or `mpirun` (or alone).
#pragma once

#include <string>
#include <vector>

namespace pcdino {

/// Initialises MPI (MPI_THREAD_SERIALIZED: one thread at a time calls MPI, e.g. training's communication
/// thread while the main thread runs backward) on first construction; MPI is
/// finalised when the process exits. Throws Error (exit code 78) if Slurm started several tasks in this step
/// but MPI sees a world of one: `srun` without `--mpi=pmix` would otherwise run N independent copies.
class MpiWorld {
 public:
  MpiWorld();
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Rank among the processes on this node (from the launcher's environment; 0 if unknown).
  int local_rank() const { return local_rank_; }
  /// Number of ranks on this node (MPI_COMM_TYPE_SHARED), to share the node's cores among them.
  int local_size() const { return local_size_; }
  /// This process's host name, for log lines.
  const std::string& host() const { return host_; }

  void barrier() const;

  /// Gathers `values` (the same length on every rank) to rank 0: [size() * values.size()] in rank
  /// order on rank 0, empty on the others.
  std::vector<double> gather(const std::vector<double>& values) const;

  /// Gathers one string per rank to rank 0 (in rank order); empty on the others.
  std::vector<std::string> gather(const std::string& value) const;

  /// Every rank's string on every rank, in rank order (MPI_Allgatherv).
  std::vector<std::string> allgather(const std::string& value) const;

  /// The largest `value` over all ranks, on every rank.
  long long allreduce_max(long long value) const;

  /// The sum of `value` over all ranks, on every rank.
  double allreduce_sum(double value) const;

  /// Sends rank 0's `value` to every rank (overwriting theirs).
  void broadcast(std::string& value) const;
  void broadcast(int& value) const;

  /// Ends every rank of the job with `exit_code` (MPI_Abort): the way out when one rank fails while the
  /// others may be waiting in a collective. Flushes stdout and stderr and waits a second first, so that
  /// srun forwards the lines that say why before the step is cancelled.
  [[noreturn]] void abort(int exit_code) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::string host_;
};

}  // namespace pcdino
