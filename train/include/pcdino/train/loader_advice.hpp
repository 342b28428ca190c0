// Whether the loader keeps the step fed, and how many loader threads would: from what an epoch measured.
// No LibTorch here (pcdino_train_augment).
#pragma once

namespace pcdino::train {

/// The share of a step's time spent waiting for data above which `pcdino train` warns (10%: the step's
/// speed is then the loader's, not the model's).
inline constexpr double kDataWaitWarnShare = 0.10;

/// What an epoch says about its loader.
struct LoaderAdvice {
  double wait_share = 0;   ///< data wait / (data wait + compute), 0..1
  int threads_needed = 1;  ///< loader threads that make a batch per step: ceil(batch seconds / compute)
  bool warn = false;       ///< wait_share > kDataWaitWarnShare
};

/// `data_wait` and `compute` (forward + backward + update) are seconds per step; `batch_seconds` is one
/// loader thread's seconds to make one batch of this rank (read, decode, every crop), as the epoch's loader
/// threads measured it. Threads needed: a step consumes a batch every `compute` seconds, one thread makes
/// one every `batch_seconds`. Non-positive or non-finite inputs give no warning and 1 thread.
LoaderAdvice advise_loader(double data_wait, double compute, double batch_seconds);

}  // namespace pcdino::train
