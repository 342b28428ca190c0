// Fail-fast for a training job whose ranks wait on each other in collectives (issue #5): a rank that stops
// hearing from its peers ends itself instead of hanging until the job's time limit.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace pcdino::train {

/// Fail-fast for a job whose ranks wait on each other: if progress() is not called for `timeout_seconds`
/// (a rank blocked in a collective because a peer died or stopped answering), logs an error naming this
/// rank, the seconds waited and the last progress, and ends the process with exit code 74, so that srun
/// (--kill-on-bad-exit) or mpirun ends the others and the job does not hang until its time limit. NCCL's
/// own error checks cover its side; this covers MPI and anything else. timeout_seconds <= 0: disabled.
///
/// A stop (SIGTERM, SIGUSR1) is agreed among all ranks before anything is written. With `stop_flag`, a
/// rank that sees the flag set (within a second) and makes no progress within `stop_timeout_seconds` after
/// it (a peer died or hung, so the agreement never completes) ends the same way, instead of after
/// `timeout_seconds` or at the job's time limit: a node failure never blocks on the agreed checkpoint.
/// progress() with the flag set is the agreement: the checkpoint after it has no deadline but `timeout`.
class Watchdog {
 public:
  Watchdog(double timeout_seconds, int rank, int size, const std::atomic<bool>* stop_flag = nullptr,
           double stop_timeout_seconds = 0);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// This rank got through its collectives; `what` says where it is (e.g. "epoch 3 iteration 17"). Called
  /// with the stop flag set, the stop is agreed.
  void progress(const std::string& what);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pcdino::train
