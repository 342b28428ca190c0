// The run that run_training() (pcdino/train/trainer.hpp) makes of train_scDINO: the Training object, whose
// set-up is training_setup.cpp and whose epochs and epoch ends are trainer.cpp, and the time budget it
// keeps. Private to train/src.
#pragma once

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <optional>
#include <sstream>

#include "epoch.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/core/staging.hpp"
#include "pcdino/monitoring/metrics.hpp"
#include "pcdino/train/augment.hpp"
#include "pcdino/train/batch.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/comm.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/fusion.hpp"
#include "pcdino/train/kernel_profile.hpp"
#include "pcdino/train/loader_advice.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/online_knn.hpp"
#include "pcdino/train/phase_clock.hpp"
#include "pcdino/train/process.hpp"
#include "pcdino/train/schedules.hpp"
#include "pcdino/train/step_graph.hpp"
#include "pcdino/train/watchdog.hpp"
#include "resume.hpp"

namespace pcdino::train::detail {

/// Set by SIGTERM and SIGUSR1 (install_stop_signal_handlers()): the ranks stop at a step they agree on.
extern std::atomic<bool> stop_requested;

// The checkpoint arguments holding what train_scDINO.time_budget_minutes chose: the run's steps and where
// its schedules were cut ("from_step from_index", ScheduleCut), and the epochs they make. Checkpoints of
// pcdino from before steps were cut hold kBudgetEpochsArg alone (whole epochs, the schedules rebuilt for
// them); a restart from one keeps that.
constexpr const char* kBudgetStepsArg = "steps_by_time_budget";
constexpr const char* kScheduleCutArg = "schedule_cut";
constexpr const char* kBudgetEpochsArg = "epochs_by_time_budget";
// use_fp16 on a CPU with --amp-dtype auto: the precision the first start timed faster ("float32",
// "bfloat16"), kept so that a restart trains as the run began.
constexpr const char* kCpuPrecisionArg = "cpu_precision";

// train_scDINO.time_budget_minutes in the first start of a run: the steps that fit. A first estimate after
// a measured stretch of the first epoch: the median seconds per step of its full 10-iteration windows 2 to
// 1 + kStretchWindows (the first window holds the loader's warm-up and the first steps' allocations; the
// median leaves out a busy moment), with nothing yet known of an epoch's end. Then one at the end of every
// whole epoch: the median of its windows but the first, and the epoch end's own seconds (checkpoint,
// online kNN). All count from the run's start, so the untrained online kNN and the start-up are spent
// time; the last online kNN is reserved at the untrained one's seconds.
class TimeBudget {
 public:
  static constexpr std::size_t kStretchWindows = 3;
  TimeBudget(double budget_seconds, std::chrono::steady_clock::time_point started, std::size_t full_steps,
             std::size_t niter)
      : budget_seconds_(budget_seconds), started_(started), full_(full_steps), niter_(niter) {}

  double run_end_seconds = 0;  // reserved for the work at the run's end (the last online kNN)

  // The first estimate, at the window that ends the stretch (the same window on every rank), else none.
  // `windows`: the first epoch's windows so far, seconds per step.
  std::optional<std::size_t> after_window(std::size_t steps_done, const std::vector<double>& windows) {
    if (windows.size() != kStretchWindows + 1) return std::nullopt;
    return estimate(steps_done, median({windows.begin() + 1, windows.end()}), 0);
  }
  // The estimate at the end of a whole epoch: `windows` its windows' seconds per step, or, with fewer than
  // two, `mean_step_seconds`; `epoch_end_seconds` its end's work.
  std::size_t at_epoch_end(std::size_t steps_done, const std::vector<double>& windows,
                           double mean_step_seconds, double epoch_end_seconds) {
    const double step =
        windows.size() >= 2 ? median({windows.begin() + 1, windows.end()}) : mean_step_seconds;
    return estimate(steps_done, step, epoch_end_seconds);
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  double last_step_seconds() const { return last_step_seconds_; }

 private:
  static double median(std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  std::size_t estimate(std::size_t steps_done, double step_seconds, double epoch_end_seconds) {
    last_step_seconds_ = step_seconds;
    return steps_within_budget(full_, niter_, steps_done, budget_seconds_, elapsed(),
                               StepCosts{step_seconds, epoch_end_seconds, run_end_seconds});
  }
  double budget_seconds_;
  std::chrono::steady_clock::time_point started_;
  std::size_t full_, niter_;
  double last_step_seconds_ = 0;
};

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One run of train_scDINO (main_dino.py's train_dino): the set-up in the order main_dino.py does it (the
// device, the data, the student and teacher, the loss, the optimizer, a checkpoint to resume, the
// schedules), then the epochs, each followed by its end (checkpoint, online kNN, the time budget's
// estimate, the logs). One object per run_training call; its members are what train_dino's locals were.
class Training {
 public:
  Training(const PipelineConfig& c, const TrainRuntime& rt, const MpiWorld* world)
      : c_(c),
        rt_(rt),
        h_(c.train.hyperparameters),
        world_(world),
        ranks_(world ? world->size() : 1),
        rank_(world ? world->rank() : 0),
        writer_(rank_ == 0) {}

  TrainReport run();

 private:
  void set_up_threads() const;
  void set_up_device();
  void set_up_data();
  void set_up_models();
  void set_up_run_folder();
  void resume();
  void keep_resumed_budget(std::map<std::string, std::string>& args);
  void choose_cpu_precision();
  void set_up_data_parallel();
  void set_up_online_knn();
  void set_up_epoch_context();
  void set_up_time_budget();
  std::function<Batch(std::size_t)> batches(int epoch, std::size_t first_iter) const;
  TrainReport stop(int epoch, std::size_t done);
  void end_epoch(int epoch, EpochStats& stats, Clock::time_point epoch_started, std::size_t first_iter);
  void estimate_at_epoch_end(int epoch, const EpochStats& stats, Clock::time_point epoch_started);
  void log_epoch(int epoch, const EpochStats& stats, double entropy_epoch, std::optional<double> knn_top1);
  void apply_cut(std::size_t done, std::size_t chosen, const std::string& when);

  const PipelineConfig& c_;
  const TrainRuntime& rt_;
  const DinoHyperparameters& h_;
  const MpiWorld* world_;
  const Clock::time_point started_ = Clock::now();  // train_scDINO.time_budget_minutes counts from here
  const int ranks_, rank_;
  const bool writer_;  // one rank writes checkpoints and logs
  std::unique_ptr<monitoring::MetricsFile> prometheus_;
  torch::Device device_ = torch::kCPU;
  std::optional<torch::ScalarType> amp_;
  std::unique_ptr<StepGraph> graph_;
  // The data: the training split's images, the normalisation, the steps per epoch.
  std::optional<StagedDataset> staged_;  // train_scDINO.stage_dataset's copy on this node
  std::optional<Dataset> ds_;
  std::vector<std::size_t> train_;
  MeanStdValues ms_;
  std::size_t global_batch_ = 0, niter_ = 0;
  MultiCropOptions crops_;
  ImageTransform transform_;
  std::unique_ptr<BatchPool> batch_pool_ = std::make_unique<BatchPool>();  // the loader's, on a CPU
  // The loader threads' time making batches since the last epoch's record (advise_loader's figure).
  struct LoaderTime {
    std::atomic<std::int64_t> nanoseconds{0}, batches{0};
    std::atomic<std::size_t> replaced{0};  ///< unreadable images replaced (meta.skip_corrupt), in all
    void add(double seconds) {
      nanoseconds += static_cast<std::int64_t>(seconds * 1e9);
      ++batches;
    }
    /// Seconds per batch since the last call (NaN with none), and a fresh count.
    double take() {
      const std::int64_t n = batches.exchange(0), ns = nanoseconds.exchange(0);
      return n > 0 ? static_cast<double>(ns) * 1e-9 / static_cast<double>(n) : std::nan("");
    }
  };
  std::unique_ptr<LoaderTime> loader_time_ = std::make_unique<LoaderTime>();
  int loader_threads_ = 1;
  // The models and what trains them.
  VitOptions vo_;
  MultiCropWrapper student_{nullptr}, teacher_{nullptr};
  std::unique_ptr<DinoLoss> loss_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<MultiTensorAdamW> optimizer_;
  std::unique_ptr<GradientFusion> fusion_;
  std::unique_ptr<Watchdog> watchdog_;
  // What every epoch works with; its `epochs` is the run's (cut by train_scDINO.time_budget_minutes).
  std::unique_ptr<EpochContext> ctx_;
  std::unique_ptr<PhaseClock> phase_clock_;
  ScheduleCut resumed_cut_;  // the cut of an earlier start (steps 0: none)
  // The run's files.
  std::string output_dir_, checkpoint_, previous_checkpoint_, metrics_file_;
  CheckpointState state_;
  TrainReport report_;
  std::unique_ptr<OnlineKnn> online_knn_;
  double untrained_knn_seconds_ = 0;  // what the time budget keeps for the last online kNN
  Batch
      synthetic_;  // --synthetic-crops: drawn from a generator of their own (the default one is the model's)
  double seconds_this_run_ = 0;
  bool budget_open_ = false;  // this start makes the time budget's estimates: the first of a run with one
  std::unique_ptr<TimeBudget> budget_;
};

}  // namespace pcdino::train::detail
