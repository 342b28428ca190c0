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

/// The epochs a run of `epochs` trains under train_scDINO.time_budget_minutes, decided at the end of an
/// epoch: `epochs_done` epochs are finished, everything so far (start-up, the untrained online kNN, the
/// epochs with their checkpoints and kNN) took `elapsed_seconds`, and each later epoch is taken to last
/// `epoch_seconds` (the one just ended). Returns the most epochs whose estimate ends within
/// `budget_seconds`: never fewer than epochs_done nor max(1, `min_epochs`) (the warm-up must end), never
/// more than `epochs`. All times in seconds.
int epochs_within_budget(int epochs, int min_epochs, int epochs_done, double budget_seconds,
                         double elapsed_seconds, double epoch_seconds);

/// The learning rate DINO scales by the global batch: lr * batch_size_total / 256 (main_dino.py).
inline double scaled_learning_rate(double lr, int batch_size_total) {
  return lr * batch_size_total / 256.0;
}

}  // namespace pcdino::train
