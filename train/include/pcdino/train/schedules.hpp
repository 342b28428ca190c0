// Per-iteration schedules of DINO training (no LibTorch here: the trainer's loop and tests use them alike).
#pragma once

#include <cstddef>
#include <vector>

namespace pcdino::train {

/// DINO's utils.cosine_scheduler: `warmup_epochs * niter_per_epoch` values rising linearly from
/// `start_warmup_value` to `base_value` (numpy.linspace, end included), then cosine decay
/// final + (base - final)(1 + cos(pi i / n)) / 2 over the remaining n iterations.
/// Length epochs * niter_per_epoch. Throws std::invalid_argument if warmup_epochs > epochs.
std::vector<double> cosine_schedule(double base_value, double final_value, int epochs,
                                    std::size_t niter_per_epoch, int warmup_epochs = 0,
                                    double start_warmup_value = 0);

/// The teacher temperature per epoch (DINOLoss.teacher_temp_schedule): linear from `warmup_temp` to
/// `temp` over `warmup_epochs` (end included), then `temp`. Length `epochs`.
std::vector<double> teacher_temperature_schedule(double warmup_temp, double temp, int warmup_epochs,
                                                 int epochs);

/// What a run under train_scDINO.time_budget_minutes expects to spend, in seconds: a step, the work at
/// each epoch's end (checkpoint, online kNN), and the work once at the run's end (its last online kNN).
struct StepCosts {
  double step_seconds = 0;
  double epoch_end_seconds = 0;
  double run_end_seconds = 0;
};

/// The steps (iterations over all epochs) a run trains under train_scDINO.time_budget_minutes: the most
/// total steps T, steps_done <= T <= full_steps, for which elapsed_seconds + (T - steps_done) step_seconds
/// + (epoch ends after steps_done up to T, the last, shorter epoch's included) epoch_end_seconds +
/// run_end_seconds stays within budget_seconds. At least steps_done (over budget already: it ends now),
/// and at least 1. `niter` is the steps of a whole epoch.
std::size_t steps_within_budget(std::size_t full_steps, std::size_t niter, std::size_t steps_done,
                                double budget_seconds, double elapsed_seconds, const StepCosts& costs);

/// Where a run cut by train_scDINO.time_budget_minutes reads its per-iteration schedules (lr, weight
/// decay, momentum, teacher temperature): the steps from `from_step` on are spread evenly over the uncut
/// run's schedule from `from_index` to its end, so the cut run's last step (steps - 1) reads the last value
/// (full - 1) and every schedule ends as the uncut run's does. Steps before `from_step` (trained before
/// the cut) read their own index. The default {0, 0, full, full} reads every step's own index.
struct ScheduleCut {
  std::size_t from_step = 0;   ///< the step the cut was made at (steps done then)
  std::size_t from_index = 0;  ///< the schedule index that step reads
  std::size_t steps = 0;       ///< the run's steps
  std::size_t full = 0;        ///< the uncut run's steps (the schedules' length)
  /// The schedule index step `step` reads, in [0, full).
  std::size_t index(std::size_t step) const;
  /// The cut to `new_steps` made at `step`, continuing from the index this cut gives `step`.
  ScheduleCut recut(std::size_t step, std::size_t new_steps) const;
};

/// The learning rate DINO scales by the global batch: lr * batch_size_total / 256 (main_dino.py).
inline double scaled_learning_rate(double lr, int batch_size_total) {
  return lr * batch_size_total / 256.0;
}

}  // namespace pcdino::train
