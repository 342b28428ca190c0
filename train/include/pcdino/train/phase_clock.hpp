// The time of each phase of a training step (issue #22). On a GPU the host only queues kernels, so its
// clock measures launches, not work: there the phases are timed by CUDA events on the device's own
// timeline (as torch.cuda.Event(enable_timing=True) times PyTorch code); on a CPU by the steady clock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>

namespace pcdino::train {

/// The phases of a training step, in the order they run.
enum class Phase : std::size_t {
  kData,      ///< waiting for the loader and copying the crops to the device
  kForward,   ///< teacher and student forward passes and the loss
  kBackward,  ///< autograd and the gradients' allreduce
  kUpdate,    ///< unscaling, clipping, optimizer step, EMA of the teacher
};
inline constexpr std::size_t kPhaseCount = 4;

/// Seconds per phase (indexed by Phase), summed over the steps collected.
using PhaseSeconds = std::array<double, kPhaseCount>;

/// Marks the phases of training steps and sums their times.
///
/// With CUDA events each mark is an event recorded on the device's legacy default stream, the stream
/// LibTorch queues on unless a stream guard says otherwise; a phase lasts from the previous mark's event to
/// its own, so it includes the device waiting for the host (a slow loader shows as data time), and a
/// step's phases add up to its time on the device from start() to its last lap() (what runs between one
/// step's last lap and the next start, e.g. a reading of the loss, is in no phase). Events are read only by
/// collect(), which waits for the last one: call it where the step reads the device anyway, every few
/// steps (the events of the marks since the last call are kept until then).
class PhaseClock {
 public:
  /// `cuda_device` < 0: the host's steady clock. >= 0: CUDA events of that device; throws Error
  /// (kUnavailable) naming the CUDA runtime's error when they cannot be made (no driver, no such device),
  /// or when this build has no CUDA runtime.
  explicit PhaseClock(int cuda_device = -1);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  /// A step begins.
  void start();
  /// `phase` of the current step ends: it lasted since the previous mark (start() or the last lap()).
  void lap(Phase phase);
  /// Adds the phase times of the steps marked since the previous call to `totals` (seconds) and forgets
  /// them. With CUDA events, waits for the device to reach the last mark; throws Error (kSoftware) on a
  /// CUDA error.
  void collect(PhaseSeconds& totals);
  /// What the times are: "cuda_events" or "host_clock".
  const char* source() const;

 private:
  struct Events;                    // the CUDA events, null for the host clock
  std::unique_ptr<Events> events_;  // (defined where the CUDA runtime is included)
  std::chrono::steady_clock::time_point tick_;
  PhaseSeconds pending_{};  // host clock: the times since the previous collect()
};

}  // namespace pcdino::train
