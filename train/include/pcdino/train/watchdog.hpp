// Fail-fast for a training job whose ranks wait on each other in collectives (issue #5): a rank that stops
// hearing from its peers ends itself instead of hanging until the job's time limit.
#pragma once

#include <memory>
#include <string>

namespace pcdino::train {

/// Fail-fast for a job whose ranks wait on each other: if progress() is not called for `timeout_seconds`
/// (a rank blocked in a collective because a peer died or stopped answering), logs an error naming this
/// rank, the seconds waited and the last progress, and ends the process with exit code 74, so that srun
/// (--kill-on-bad-exit) or mpirun ends the others and the job does not hang until its time limit. NCCL's
/// own error checks cover its side; this covers MPI and anything else. timeout_seconds <= 0: disabled.
class Watchdog {
 public:
  Watchdog(double timeout_seconds, int rank, int size);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// This rank got through its collectives; `what` says where it is (e.g. "epoch 3 iteration 17").
  void progress(const std::string& what);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pcdino::train
