// One epoch of DINO training (main_dino.py's train_one_epoch) and what it works with: the trainer's
// private interface between run_training (the set-up and the end of each epoch, trainer.cpp) and the
// steps (epoch.cpp).
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/monitoring/metrics.hpp"
#include "pcdino/train/batch.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/dino.hpp"
#include "pcdino/train/fusion.hpp"
#include "pcdino/train/kernel_profile.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/phase_clock.hpp"
#include "pcdino/train/schedules.hpp"
#include "pcdino/train/step_graph.hpp"
#include "pcdino/train/vit.hpp"
#include "pcdino/train/watchdog.hpp"

namespace pcdino::train {

/// What train_one_epoch works with (main_dino.py's train_one_epoch arguments): run_training's set-up builds
/// it and owns what it refers to.
struct EpochContext {
  EpochContext(MultiCropWrapper student, MultiCropWrapper teacher, DinoLoss& loss,
               MultiTensorAdamW& optimizer, GradScaler& scaler)
      : student(std::move(student)),
        teacher(std::move(teacher)),
        loss(loss),
        optimizer(optimizer),
        scaler(scaler) {}

  MultiCropWrapper student, teacher;  // handles to run_training's modules
  DinoLoss& loss;
  MultiTensorAdamW& optimizer;
  GradScaler& scaler;
  GradientFusion* fusion = nullptr;  // several ranks
  Watchdog* watchdog = nullptr;      // several ranks
  // Several ranks: the DINO centre's batch sum over ranks.
  std::function<void(torch::Tensor&)> allreduce_sum;
  std::vector<double> lr_schedule, wd_schedule, momentum_schedule;  // per iteration of the uncut run
  // Which schedule value each step reads, and the run's steps (train_scDINO.time_budget_minutes cuts them).
  ScheduleCut cut;
  // Called after every full 10-iteration window of the first epoch of a start with the steps done and the
  // epoch's windows so far (EpochStats::window_step_seconds); may change `cut` (the time budget's first
  // estimate).
  std::function<void(std::size_t, const std::vector<double>&)> on_window;
  const MpiWorld* world = nullptr;
  int ranks = 1;
  bool writer = true;  // writes the metrics
  torch::Device device = torch::kCPU;
  std::optional<torch::ScalarType> amp;
  PhaseClock* clock = nullptr;                        // times the phases of each step
  const std::atomic<bool>* stop_requested = nullptr;  // set by SIGTERM/SIGUSR1: stop after this step
  // --cuda-graph: the step's graph, its static crops (made at the first graphed step) and the schedules'
  // values on the device (the teacher temperature float32, as the loss divides by it), all filled before
  // each replay. One graph serves the whole run: nothing of an epoch is baked into it.
  bool graph_step = false;     // --cuda-graph's step from the epoch the last layer trains
  StepGraph* graph = nullptr;  // null: that step runs eagerly (tests)
  Batch graph_inputs;
  torch::Tensor lr_t, wd_t, momentum_t, teacher_temp_t;
  // The sums the step adds into on the device, made once and zeroed at each epoch's start (a graph writes
  // into these): the teacher entropies of the epoch, read at its end, and the losses of the metrics window
  // (float64: thousands of float32 terms over an epoch).
  torch::Tensor entropy_sum, window_loss_sum;
  double clip_grad = 0;
  int freeze_last_layer = 0;
  int epochs = 0;
  std::size_t niter = 0;         // iterations per epoch
  std::size_t global_batch = 0;  // images per iteration over all ranks
  long long stop_after_iterations = 0;
  std::string metrics_file;
  long long iterations_this_run = 0;              // over all epochs of this run
  monitoring::MetricsFile* prometheus = nullptr;  // this rank's Prometheus metrics
  double comm_wait_seconds = 0;                   // host time in the centre's and the stop's collectives
  double allreduce_bytes_per_step = 0;            // the gradient buffers' bytes (several ranks)
};

/// What train_one_epoch gathered (MetricLogger's meters) for the end of the epoch.
struct EpochStats {
  double loss_sum = 0;
  std::size_t loss_count = 0;
  PhaseSeconds phases{};                // summed over the epoch's steps (PhaseClock::collect)
  double lr = 0, wd = 0, momentum = 0;  // of the last iteration
  double seconds = 0;                   // the epoch's wall time
  // Set when all ranks stopped on request (a signal, stop_after_iterations): the epoch's iterations done.
  std::optional<std::size_t> stopped_after;
  std::vector<double> window_step_seconds;     // each full 10-iteration window's seconds per step
  std::optional<KernelTotals> kernel_profile;  // --profile-kernels: what the epoch's kernels took
};

/// The iterations epoch `epoch` runs: all of them, or up to the run's last step in the last epoch of a cut.
std::size_t epoch_iterations(const EpochContext& ctx, int epoch);

/// One epoch from iteration `first_iter` on (main_dino.py's train_one_epoch): per iteration the schedules'
/// lr, weight decay and momentum, teacher and student forward, DINO loss, backward (averaged over ranks),
/// clipping, the frozen last layer, AdamW step, EMA of the teacher, and a metrics record every 10
/// iterations. `loader` gives the epoch's batches from `first_iter`. Returns early, with `stopped_after`,
/// when all ranks agree to stop. Throws DataError for a non-finite loss.
///
/// The step never waits for the device: the losses and teacher entropies are summed there and read every
/// 10 iterations, at the epoch's end and before a stop (main_dino.py reads loss.item() every step), so a
/// non-finite loss is found at the next reading, before anything is written.
EpochStats train_one_epoch(EpochContext& ctx, Prefetcher<Batch>& loader, int epoch, std::size_t first_iter);

/// Appends `line` and a newline to `path`. Throws CantCreateError when it cannot be opened.
void append_line(const std::string& path, const std::string& line);

}  // namespace pcdino::train
