#include "pcdino/train/trainer.hpp"

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

namespace pcdino::train {

namespace {

std::atomic<bool> stop_requested{false};

// How long ranks asked to stop wait for the others to agree before they take a peer for lost (Watchdog):
// longer than rank 0's work at an epoch's end (checkpoint, online kNN) that the others wait for, and half
// of the 120 s that a time limit's SIGUSR1 comes early by default (slurm.signal_seconds).
constexpr double kStopAgreementSeconds = 60;

extern "C" void on_stop_signal(int) {
  stop_requested.store(true);
}

// CUDA events on a GPU, the host's clock on a CPU or where the events cannot be made (said once).
std::unique_ptr<PhaseClock> make_phase_clock(const torch::Device& device) {
  if (device.is_cuda()) {
    try {
      return std::make_unique<PhaseClock>(device.has_index() ? device.index() : 0);
    } catch (const Error& e) {
      spdlog::warn("{}: a step's phases are timed by the host's clock (its kernel launches, not their work)",
                   e.what());
    }
  }
  return std::make_unique<PhaseClock>();
}

// The multi-crop augmentation (main_dino.py's DataAugmentationDINO arguments). Throws ConfigError for RGB
// images without 3 channels.
MultiCropOptions multi_crop_options(const PipelineConfig& c, const MeanStdValues& ms) {
  const DinoHyperparameters& h = c.train.hyperparameters;
  MultiCropOptions crops;
  crops.global_crops_scale = h.global_crops_scale;
  crops.local_crops_scale = h.local_crops_scale;
  crops.local_crops_number = h.local_crops_number;
  crops.global_crops_size = h.global_crops_size;
  crops.local_crops_size = h.local_crops_size;
  crops.mean = ms.mean;
  crops.std = ms.std;
  crops.rgb = c.meta.images_are_RGB;
  crops.scale_augmentation_to_crop = h.scale_augmentation_to_crop;
  crops.vflip = h.vflip.value_or(!crops.rgb);  // the pipeline's reference by default
  if (crops.rgb && ms.mean.size() != 3) {
    throw ConfigError(c.source + ": meta.images_are_RGB is set but the selected channels are " +
                      std::to_string(ms.mean.size()) + " (the mean/std file); DINO's RGB pipeline needs 3");
  }
  return crops;
}

// Several ranks: every rank starts from rank 0's weights and centre (after a resume too); returns the
// gradient fusion attached to the student's trained parameters.
std::unique_ptr<GradientFusion> start_data_parallel(Communicator& comm, MultiCropWrapper& student,
                                                    MultiCropWrapper& teacher, DinoLoss& loss,
                                                    double fusion_threshold_mb) {
  std::vector<torch::Tensor> shared;
  for (auto* m : {&student, &teacher}) {
    for (auto& p : (*m)->parameters()) shared.push_back(p.data());
    for (auto& b : (*m)->buffers()) shared.push_back(b.data());
  }
  shared.push_back(loss.center);
  {
    torch::NoGradGuard no_grad;
    comm.broadcast(shared, 0);
  }
  std::vector<torch::Tensor> trained;
  for (auto& p : student->parameters()) {
    if (p.requires_grad()) trained.push_back(p);
  }
  FusionOptions fo;
  fo.threshold_bytes = static_cast<std::size_t>(fusion_threshold_mb * 1024.0 * 1024.0);
  auto fusion = std::make_unique<GradientFusion>(comm, trained, fo);
  fusion->attach();
  return fusion;
}

// Random crops of one step's shapes from `generator`, each [batch, in_channels, size, size]: the 2 global
// crops, then the local ones.
Batch random_crops(const DinoHyperparameters& h, int64_t in_channels, int64_t batch,
                   at::Generator generator) {
  Batch crops;
  for (int k = 0; k < 2 + h.local_crops_number; ++k) {
    const int64_t size = k < 2 ? h.global_crops_size : h.local_crops_size;
    crops.push_back(torch::randn({batch, in_channels, size, size}, generator));
  }
  return crops;
}

// use_fp16 on a CPU: images/s of the student's forward and backward over random crops of the run's shapes
// in float32 and under bfloat16 autocast, kSteps steps of each after one to warm up, summed over ranks (they
// share the node's cores as in training). A CPU flag does not say which is faster: with AVX512_BF16 and no
// AMX, bfloat16's step was 0.62-0.70x float32's on an Intel Xeon and 1.25x on an AMD Zen 5 (issue #51).
// Without either, bfloat16 is emulated (16x slower on an AMD EPYC): a bfloat16 warm-up step longer than
// float32's kSteps timed ones ends its timing there, its rate taken from that step. The default
// generator's state (drop path, the crops) is put back, so the run trains as it would without the timing.
std::pair<double, double> time_cpu_precisions(MultiCropWrapper& student, const VitOptions& vo,
                                              const DinoHyperparameters& h, int batch, const MpiWorld* world,
                                              int ranks) {
  constexpr int kSteps = 3;
  auto generator = at::detail::getDefaultCPUGenerator();
  const auto generator_state = generator.get_state();
  const Batch crops = random_crops(h, vo.in_channels, batch, generator);
  const auto step_seconds = [&](std::optional<torch::ScalarType> dtype) {
    const auto start = std::chrono::steady_clock::now();
    {
      const AutocastGuard autocast(dtype, c10::DeviceType::CPU);
      student->forward(crops).to(torch::kFloat32).square().mean().backward();
    }
    for (auto& p : student->parameters()) p.mutable_grad() = torch::Tensor();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto timed = [&](std::optional<torch::ScalarType> dtype, double give_up_after) {
    const double warm_up = step_seconds(dtype);
    if (warm_up > give_up_after) return batch / warm_up;
    double seconds = 0;
    for (int step = 0; step < kSteps; ++step) seconds += step_seconds(dtype);
    return kSteps * batch / seconds;
  };
  double float32 = timed(std::nullopt, std::numeric_limits<double>::infinity());
  double bfloat16 = timed(torch::kBFloat16, kSteps * batch / float32);
  generator.set_state(generator_state);
  if (ranks > 1) float32 = world->allreduce_sum(float32), bfloat16 = world->allreduce_sum(bfloat16);
  return {float32, bfloat16};
}

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

double seconds_since(Clock::time_point start) {
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

void Training::set_up_threads() const {
  if (rt_.threads > 0) torch::set_num_threads(rt_.threads);
  run_opencv_on_calling_threads();  // the loader's cores are its --loader-threads, none taken from the step
  if (const int blas = share_blas_threads(world_ ? world_->local_size() : 1, rt_.threads);
      blas > 0 && ranks_ > 1) {
    spdlog::info("OpenBLAS threads per rank: {} ({} rank(s) on this machine)", blas, world_->local_size());
  }
  if (torch::get_num_threads() > 1) {  // how idle OpenMP threads wait decides the step on few cores
    const char *policy = std::getenv("OMP_WAIT_POLICY"), *spin = std::getenv("GOMP_SPINCOUNT");
    spdlog::info("OpenMP: {} threads, OMP_WAIT_POLICY={} GOMP_SPINCOUNT={}", torch::get_num_threads(),
                 policy ? policy : "(unset)", spin ? spin : "(unset)");
  }
}

// The device and its precision, and --cuda-graph's and --profile-kernels' conditions, before anything is
// written.
void Training::set_up_device() {
  device_ = select_device(device_option(rt_.device, c_.slurm.accelerator),
                          world_ ? world_->local_rank() : rt_.local_rank);
  amp_ = h_.use_fp16 ? autocast_dtype(device_, rt_.amp_dtype) : std::nullopt;
  if (rt_.profile_kernels && !device_.is_cuda()) {
    throw ConfigError(
        "--profile-kernels: times a GPU's kernels (CUPTI, through the PyTorch profiler); this run "
        "trains on " +
        device_.str());
  }
  if (!rt_.cuda_graph) return;
  if (amp_ == torch::kHalf) {
    throw ConfigError(
        "--cuda-graph: not with float16 autocast (its loss scaling decides on the host "
        "whether a step is skipped); use --amp-dtype bfloat16 or use_fp16: false");
  }
  StepGraph::AllRanks all_ranks;
  if (ranks_ > 1) {  // every rank keeps its graph, or none does
    const MpiWorld* world = world_;
    all_ranks = [world](bool captured) { return world->allreduce_max(captured ? 0 : 1) == 0; };
  }
  graph_ = std::make_unique<StepGraph>(device_, 3, all_ranks);
}

void Training::set_up_data() {
  ds_.emplace(Dataset::open(meta_with_staged_dataset(c_, staged_)));
  train_ = train_heldout_split(ds_->size(), c_.meta.train_datasetsplit_fraction, c_.meta.seed).train;
  if (rt_.limit_images > 0 && static_cast<std::size_t>(rt_.limit_images) < train_.size())
    train_.resize(rt_.limit_images);
  ms_ = read_mean_std(RunLayout(c_).mean_std);
  const int batch = c_.train.batch_size_per_gpu;
  // Each step takes batch * ranks images of the epoch's permutation; rank r the r-th of every `ranks`
  // (DistributedSampler's interleaving), so a step sees the same images whatever the number of ranks.
  global_batch_ = static_cast<std::size_t>(batch) * static_cast<std::size_t>(ranks_);
  niter_ = train_.size() / global_batch_;  // drop_last, as the reference
  if (niter_ == 0) {
    throw ConfigError(c_.source + ": train_scDINO.batch_size_per_gpu " + std::to_string(batch) + " x " +
                      std::to_string(ranks_) + " rank(s) is larger than the training split (" +
                      std::to_string(train_.size()) + " images)");
  }
}

// The student and the teacher (its copy, trained by EMA), the DINO loss, the communicator and AdamW.
void Training::set_up_models() {
  vo_ = VitOptions::from_config(h_, static_cast<int>(ms_.mean.size()));
  student_ =
      MultiCropWrapper(VisionTransformer(vo_), DinoHead(vo_.embed_dim, h_.out_dim, h_.norm_last_layer));
  VitOptions to = vo_;
  to.drop_path_rate = 0;
  teacher_ = MultiCropWrapper(VisionTransformer(to), DinoHead(vo_.embed_dim, h_.out_dim));
  {
    torch::NoGradGuard no_grad;
    auto t = teacher_->parameters(), s = student_->parameters();
    for (std::size_t i = 0; i < t.size(); ++i) t[i].copy_(s[i]);
  }
  for (auto& p : teacher_->parameters()) p.set_requires_grad(false);
  loss_ = std::make_unique<DinoLoss>(h_.out_dim, h_.local_crops_number + 2, h_.warmup_teacher_temp,
                                     h_.teacher_temp, h_.warmup_teacher_temp_epochs, c_.train.epochs);
  // Models are built on the CPU, so that a seed gives the same initial weights on every device.
  student_->to(device_);
  teacher_->to(device_);
  loss_->center = loss_->center.to(device_);
  scaler_ = std::make_unique<GradScaler>(amp_ == torch::kHalf);
  if (ranks_ > 1) comm_ = make_communicator(*world_, device_);
  if (graph_ && comm_ && !comm_->graph_capturable()) {  // the gradients' and the centre's allreduce are in it
    throw ConfigError("--cuda-graph with " + std::to_string(ranks_) +
                      " ranks: the collectives are captured with the step, which needs NCCL 2.9.6 or later, "
                      "CUDA 11.3 or later and a LibTorch with CUDA; this is " +
                      comm_->version() + ": run without --cuda-graph or on one rank");
  }
  if (device_.is_cuda()) {
    spdlog::info("training on {} with {}", device_.str(),
                 amp_ ? std::string("autocast to ") + c10::toString(*amp_) +
                            (scaler_->enabled() ? " and loss scaling" : "")
                      : std::string("float32 (use_fp16 false)"));
  } else if (amp_ && rt_.amp_dtype != "auto") {
    spdlog::info("training on the CPU with autocast to {} (--amp-dtype)", c10::toString(*amp_));
  }
  optimizer_ = std::make_unique<MultiTensorAdamW>(params_groups(student_), torch::optim::AdamWOptions(0.0));
  ctx_ = std::make_unique<EpochContext>(student_, teacher_, *loss_, *optimizer_, *scaler_);
  ctx_->epochs = c_.train.epochs;
  if (h_.warmup_epochs > ctx_->epochs) {
    throw ConfigError(c_.source + ": train_scDINO.hyperparameters.warmup_epochs (" +
                      std::to_string(h_.warmup_epochs) + ") is larger than train_scDINO.epochs (" +
                      std::to_string(ctx_->epochs) + ")");
  }
}

// The output folder (a killed writer's temporaries removed) and the checkpoint's arguments: the run's,
// tagged with the Slurm job's start and the writer, so that a stale process of an earlier start is found
// (save_latest_checkpoint).
void Training::set_up_run_folder() {
  output_dir_ = rt_.output_dir.empty() ? RunLayout(c_).model.dir : rt_.output_dir;
  report_.output_dir = output_dir_;
  const ModelFiles model_files{output_dir_};
  make_directories(output_dir_);
  if (rank_ == 0) {  // the folder's one writer, before it writes
    for (const auto& file : remove_temporaries(output_dir_, ModelFiles::kCheckpointPrefix))
      spdlog::info("removed {}: a checkpoint write cut short (its process was killed)", file);
  }
  checkpoint_ = model_files.checkpoint();
  previous_checkpoint_ = model_files.previous_checkpoint();
  metrics_file_ = model_files.metrics();
  state_.args = {{"arch", h_.arch},
                 {"patch_size", std::to_string(h_.patch_size)},
                 {"out_dim", std::to_string(h_.out_dim)},
                 {"in_chans", std::to_string(vo_.in_channels)},
                 {"epochs", std::to_string(ctx_->epochs)},
                 {"batch_size_per_gpu", std::to_string(c_.train.batch_size_per_gpu)},
                 {"world_size", std::to_string(ranks_)},
                 {"seed", std::to_string(c_.meta.seed)},
                 {"global_crops_size", std::to_string(h_.global_crops_size)},
                 {"local_crops_size", std::to_string(h_.local_crops_size)},
                 {"local_crops_number", std::to_string(h_.local_crops_number)}};
  const JobStart job_start = this_job_start();
  if (!job_start.job_id.empty()) {
    state_.args["slurm_job_id"] = job_start.job_id;
    state_.args["slurm_restart_count"] = std::to_string(job_start.restart);
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    state_.args["writer"] = std::string(host) + " pid " + std::to_string(::getpid());
  }
}

// --resume: the newest checkpoint that is this run's, with what an earlier start decided (the time
// budget's cut, the CPU's precision).
void Training::resume() {
  if (!rt_.resume) return;
  auto args = state_.args;
  const std::string loaded =
      load_newest_checkpoint({checkpoint_, previous_checkpoint_}, args, student_, teacher_, *optimizer_,
                             *loss_, world_, rank_, ranks_, state_);
  if (!loaded.empty()) {
    if (c_.train.time_budget_minutes > 0) keep_resumed_budget(args);
    if (const auto kept = state_.args.find(kCpuPrecisionArg); kept != state_.args.end())
      args[kCpuPrecisionArg] = kept->second;
    state_.args = args;
    spdlog::info("resuming from {} at epoch {} iteration {}", loaded, state_.epoch, state_.iteration);
  }
  prometheus_->set("pcdino_train_epoch", state_.epoch);
}

// A cut the time budget made in an earlier start holds: the steps so far read schedules cut for it.
// `args`: the checkpoint arguments this start writes, given the loaded checkpoint's budget keys.
void Training::keep_resumed_budget(std::map<std::string, std::string>& args) {
  const auto steps = state_.args.find(kBudgetStepsArg), from = state_.args.find(kScheduleCutArg);
  const auto legacy = state_.args.find(kBudgetEpochsArg);
  if (steps != state_.args.end() && from != state_.args.end()) {
    std::istringstream in(from->second);
    in >> resumed_cut_.from_step >> resumed_cut_.from_index;
    resumed_cut_.steps = std::stoull(steps->second);
    for (const char* key : {kBudgetStepsArg, kScheduleCutArg, kBudgetEpochsArg, "epochs"})
      args[key] = state_.args.at(key);
  } else if (legacy != state_.args.end()) {
    ctx_->epochs = std::min(ctx_->epochs, std::max(state_.epoch, std::stoi(legacy->second)));
    args[kBudgetEpochsArg] = args["epochs"] = std::to_string(ctx_->epochs);
  }
}

// use_fp16 on a CPU with --amp-dtype auto: the faster precision, timed once a run (a restart keeps it).
void Training::choose_cpu_precision() {
  if (!h_.use_fp16 || !device_.is_cpu() || rt_.amp_dtype != "auto") return;
  const auto kept = state_.args.find(kCpuPrecisionArg);
  if (kept != state_.args.end()) {
    report_.cpu_precision = kept->second;
  } else {
    std::tie(report_.cpu_float32_images_per_second, report_.cpu_bfloat16_images_per_second) =
        time_cpu_precisions(student_, vo_, h_, c_.train.batch_size_per_gpu, world_, ranks_);
    report_.cpu_precision = report_.cpu_bfloat16_images_per_second > report_.cpu_float32_images_per_second
                                ? "bfloat16"
                                : "float32";
    state_.args[kCpuPrecisionArg] = report_.cpu_precision;
    spdlog::info(
        "use_fp16 on the CPU: the student's step timed at {:.1f} images/s in float32 and {:.1f} under "
        "bfloat16 autocast: training in {} (--amp-dtype chooses instead)",
        report_.cpu_float32_images_per_second, report_.cpu_bfloat16_images_per_second, report_.cpu_precision);
  }
  amp_ =
      report_.cpu_precision == "bfloat16" ? std::optional<torch::ScalarType>(torch::kBFloat16) : std::nullopt;
}

void Training::set_up_data_parallel() {
  if (!comm_) return;
  watchdog_ = std::make_unique<Watchdog>(rt_.comm_timeout_seconds, rank_, ranks_, &stop_requested,
                                         std::min(rt_.comm_timeout_seconds, kStopAgreementSeconds));
  fusion_ = start_data_parallel(*comm_, student_, teacher_, *loss_, rt_.fusion_threshold_mb);
  spdlog::info("{} ranks ({}), {} gradient buffer(s) of at most {} MiB, global batch {}", ranks_,
               comm_->backend(), fusion_->buckets().size(), rt_.fusion_threshold_mb, global_batch_);
}

// The writer's online kNN, and at a run's start the untrained teacher's: the level to beat.
void Training::set_up_online_knn() {
  if (!writer_ || h_.online_knn_every <= 0) return;
  online_knn_ = std::make_unique<OnlineKnn>(*ds_, c_, transform_, ms_, h_.online_knn_images);
  if (state_.epoch != 0 || state_.iteration != 0) return;
  const auto knn_started = Clock::now();
  const double top1 = online_knn_->top1(teacher_->backbone, device_);
  untrained_knn_seconds_ = seconds_since(knn_started);
  spdlog::info("online kNN top-1 before training {:.2f}% ({} held-out images, k {}, T {})", top1,
               online_knn_->images(), OnlineKnn::kK, OnlineKnn::kTemperature);
  MetricsRecord start;
  start.kind = MetricsRecord::Kind::kStart, start.online_knn_top1 = top1;
  append_line(metrics_file_, format_metrics_record(start));
}

// What every epoch uses: the schedules, per iteration of the whole run, and main_dino.py's other
// train_one_epoch arguments.
void Training::set_up_epoch_context() {
  EpochContext& ctx = *ctx_;
  ctx.fusion = fusion_.get();
  if (fusion_) {
    for (const auto& b : fusion_->buckets())
      ctx.allreduce_bytes_per_step += static_cast<double>(b.flat.nbytes());
  }
  ctx.watchdog = watchdog_.get();
  if (comm_) {
    ctx.allreduce_sum = [comm = comm_.get(), &ctx](torch::Tensor& t) {
      const auto start = Clock::now();
      std::vector<torch::Tensor> one{t};
      comm->allreduce(one, ReduceOp::kSum);
      ctx.comm_wait_seconds += seconds_since(start);
    };
  }
  ctx.lr_schedule = cosine_schedule(scaled_learning_rate(h_.lr, static_cast<int>(global_batch_)), h_.min_lr,
                                    ctx.epochs, niter_, h_.warmup_epochs);
  ctx.wd_schedule = cosine_schedule(h_.weight_decay, h_.weight_decay_end, ctx.epochs, niter_);
  ctx.momentum_schedule = cosine_schedule(h_.momentum_teacher, 1.0, ctx.epochs, niter_);
  const std::size_t full_steps = static_cast<std::size_t>(ctx.epochs) * niter_;
  ctx.cut = ScheduleCut{0, 0, full_steps, full_steps};
  if (resumed_cut_.steps > 0) {
    resumed_cut_.full = full_steps;
    ctx.cut = resumed_cut_;
    ctx.epochs = static_cast<int>((resumed_cut_.steps + niter_ - 1) / niter_);
  }
  ctx.world = world_, ctx.ranks = ranks_, ctx.writer = writer_;
  ctx.device = device_, ctx.amp = amp_;
  phase_clock_ = make_phase_clock(device_);
  ctx.clock = phase_clock_.get();
  ctx.stop_requested = &stop_requested;
  if (rt_.cuda_graph || rt_.graph_step_without_graph) {
    ctx.graph_step = true, ctx.graph = graph_.get();
    // float64, as the host computes the schedules (1 - momentum near 1 keeps its digits).
    const auto scalar = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
    ctx.lr_t = torch::zeros({}, scalar), ctx.wd_t = torch::zeros({}, scalar);
    ctx.momentum_t = torch::zeros({}, scalar);
    ctx.teacher_temp_t = torch::zeros({}, scalar.dtype(torch::kFloat32));
  }
  ctx.entropy_sum = torch::zeros({}, torch::TensorOptions().device(device_));
  ctx.window_loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  ctx.clip_grad = h_.clip_grad, ctx.freeze_last_layer = h_.freeze_last_layer;
  ctx.niter = niter_, ctx.global_batch = global_batch_;
  ctx.stop_after_iterations = rt_.stop_after_iterations;
  ctx.metrics_file = metrics_file_;
  ctx.prometheus = prometheus_.get();
  if (rt_.synthetic_crops) {
    synthetic_ = random_crops(h_, vo_.in_channels, c_.train.batch_size_per_gpu,
                              at::detail::createCPUGenerator(c_.meta.seed));
    for (auto& t : synthetic_) t = t.to(device_);
    spdlog::warn("--synthetic-crops: training on {} random crops made once (a benchmark, not a model)",
                 synthetic_.size());
  }
}

// train_scDINO.time_budget_minutes: the first start of a run with a budget estimates the steps that fit,
// first after a measured stretch of its first epoch (ctx.on_window), then at the end of every whole epoch.
void Training::set_up_time_budget() {
  budget_open_ = c_.train.time_budget_minutes > 0 && state_.args.count(kBudgetEpochsArg) == 0;
  budget_ = std::make_unique<TimeBudget>(c_.train.time_budget_minutes * 60, started_, ctx_->cut.full, niter_);
  budget_->run_end_seconds = untrained_knn_seconds_;
  if (budget_open_ && state_.iteration == 0) {
    ctx_->on_window = [this](std::size_t done, const std::vector<double>& windows) {
      if (const auto steps = budget_->after_window(done, windows))
        apply_cut(done, writer_ ? *steps : 0, "first estimate after a measured stretch");
    };
  }
}

// The steps rank 0 chose (the others pass 0) become the run's, its schedules read from `done` on.
void Training::apply_cut(std::size_t done, std::size_t chosen, const std::string& when) {
  EpochContext& ctx = *ctx_;
  const auto steps = static_cast<std::size_t>(
      ranks_ > 1 ? world_->allreduce_max(static_cast<long long>(chosen)) : static_cast<long long>(chosen));
  ctx.cut = ctx.cut.recut(done, steps);
  ctx.epochs = static_cast<int>((steps + niter_ - 1) / niter_);
  state_.args[kBudgetStepsArg] = std::to_string(steps);
  state_.args[kScheduleCutArg] = std::to_string(ctx.cut.from_step) + " " + std::to_string(ctx.cut.from_index);
  state_.args[kBudgetEpochsArg] = state_.args["epochs"] = std::to_string(ctx.epochs);
  spdlog::info(
      "time_budget_minutes {:g}, {}: {:.0f} s so far, {:.3f} s a step: training {} of {} steps ({} epochs, "
      "the last of {} steps); the schedules run from index {} at step {} to their end at the last step",
      c_.train.time_budget_minutes, when, budget_->elapsed(), budget_->last_step_seconds(), steps,
      ctx.cut.full, ctx.epochs, steps - static_cast<std::size_t>(ctx.epochs - 1) * niter_, ctx.cut.from_index,
      done);
}

// The batches of epoch `epoch` from `first_iter` on: this rank's share of each step's images, in the
// epoch's permutation, augmented; or the synthetic crops.
std::function<Batch(std::size_t)> Training::batches(int epoch, std::size_t first_iter) const {
  auto perm = numpy_permutation(train_.size(), c_.meta.seed + static_cast<std::uint32_t>(epoch));
  return [this, epoch, first_iter, perm = std::move(perm)](std::size_t k) {
    if (rt_.synthetic_crops) return synthetic_;
    const std::size_t it = first_iter + k;
    const auto batch = static_cast<std::size_t>(c_.train.batch_size_per_gpu);
    std::vector<std::size_t> indices;
    for (std::size_t b = 0; b < batch; ++b)
      indices.push_back(train_[perm[(it * batch + b) * static_cast<std::size_t>(ranks_) +
                                    static_cast<std::size_t>(rank_)]]);
    const auto started = Clock::now();
    Batch made = make_batch(*ds_, indices, transform_, crops_, c_.meta.seed, epoch, device_.is_cuda(),
                            batch_pool_.get());
    loader_time_->add(seconds_since(started));
    return made;
  };
}

// All ranks stopped on request after iteration `done` of `epoch`: the checkpoint to resume from.
TrainReport Training::stop(int epoch, std::size_t done) {
  state_.epoch = epoch;
  state_.iteration = static_cast<int>(done);
  if (state_.iteration == static_cast<int>(niter_)) state_.epoch = epoch + 1, state_.iteration = 0;
  gather_generator_states(world_, device_, state_);
  if (writer_)
    save_latest_checkpoint(checkpoint_, previous_checkpoint_, student_, teacher_, *optimizer_, *loss_,
                           state_);
  spdlog::warn("stopped at epoch {} iteration {}: checkpoint written to {}; resubmit to resume", epoch, done,
               checkpoint_);
  report_.epochs_done = state_.epoch;
  report_.interrupted = true;
  return report_;
}

// The end of epoch `epoch` (main_dino.py's after train_one_epoch): the means over ranks, the checkpoints,
// the online kNN, the time budget's estimate and the logs.
void Training::end_epoch(int epoch, EpochStats& stats, Clock::time_point epoch_started,
                         std::size_t first_iter) {
  seconds_this_run_ += stats.seconds;
  state_.epoch = epoch + 1;
  state_.iteration = 0;
  double entropy_epoch = ctx_->entropy_sum.item<double>();
  if (ranks_ > 1) {  // the epoch's means over all ranks, as MetricLogger.synchronize_between_processes
    stats.loss_sum = world_->allreduce_sum(stats.loss_sum) / ranks_;
    entropy_epoch = world_->allreduce_sum(entropy_epoch) / ranks_;
  }
  gather_generator_states(world_, device_, state_);
  if (writer_) {
    save_latest_checkpoint(checkpoint_, previous_checkpoint_, student_, teacher_, *optimizer_, *loss_,
                           state_);
    prometheus_->set_to_now("pcdino_train_last_checkpoint_timestamp_seconds");
  }
  prometheus_->set("pcdino_train_epoch", state_.epoch);
  if (watchdog_) watchdog_->progress("the end of epoch " + std::to_string(epoch + 1));  // after the write
  if (writer_ && c_.train.saveckp_freq > 0 && epoch % c_.train.saveckp_freq == 0) {
    keep_checkpoint_as(checkpoint_, ModelFiles{output_dir_}.epoch_checkpoint(epoch));
  }
  report_.last_epoch_loss = stats.loss_count > 0 ? stats.loss_sum / static_cast<double>(stats.loss_count) : 0;
  entropy_epoch /= static_cast<double>(std::max<std::size_t>(stats.loss_count, 1));
  std::optional<double> knn_top1;
  if (online_knn_ && ((epoch + 1) % h_.online_knn_every == 0 || epoch + 1 == ctx_->epochs)) {
    knn_top1 = online_knn_->top1(teacher_->backbone, device_);
    spdlog::info("epoch {}/{}: online kNN top-1 {:.2f}% ({} held-out images, k {}, T {})", epoch + 1,
                 ctx_->epochs, *knn_top1, online_knn_->images(), OnlineKnn::kK, OnlineKnn::kTemperature);
  }
  // Estimated again at the end of every whole epoch of the start that made the first estimate (that
  // epoch's speed, its end's work), so that a run that slowed down or sped up still ends on time. A
  // restart keeps the cut it finds.
  if (budget_open_ && first_iter == 0) {
    ctx_->on_window = nullptr;
    estimate_at_epoch_end(epoch, stats, epoch_started);
  }
  log_epoch(epoch, stats, entropy_epoch, knn_top1);
}

// The time budget's estimate at the end of a whole epoch; the planned last epoch (shorter or not) ends
// the run instead.
void Training::estimate_at_epoch_end(int epoch, const EpochStats& stats, Clock::time_point epoch_started) {
  if (stats.loss_count != niter_ || epoch + 1 >= ctx_->epochs) return;
  const double end_seconds = seconds_since(epoch_started) - stats.seconds;
  const std::size_t done = static_cast<std::size_t>(epoch + 1) * niter_;
  const std::size_t steps = budget_->at_epoch_end(done, stats.window_step_seconds,
                                                  stats.seconds / static_cast<double>(niter_), end_seconds);
  const bool first_cut = state_.args.count(kBudgetStepsArg) == 0;
  apply_cut(done, writer_ ? steps : 0, "estimate after epoch " + std::to_string(epoch + 1));
  // The checkpoint just written gets the first cut, so that a restart keeps these schedules; rewritten
  // in place, so that checkpoint.prev.pth stays the epoch before it. A later estimate goes into the
  // next epoch's: a restart from this one continues the earlier plan, which reads the same index here.
  if (writer_ && first_cut) save_checkpoint(checkpoint_, student_, teacher_, *optimizer_, *loss_, state_);
}

// The epoch's line in log.txt and record in metrics.jsonl (the writer), and its log lines.
void Training::log_epoch(int epoch, const EpochStats& stats, double entropy_epoch,
                         std::optional<double> knn_top1) {
  const int epochs = ctx_->epochs;
  const double kl_epoch = report_.last_epoch_loss - entropy_epoch;
  const double images_per_second =
      static_cast<double>(stats.loss_count * global_batch_) / std::max(stats.seconds, 1e-9);
  const double eta = (epochs - epoch - 1) * stats.seconds;
  const double steps = static_cast<double>(std::max<std::size_t>(stats.loss_count, 1));
  PhaseSeconds phases = stats.phases;
  for (double& seconds : phases) seconds /= steps;
  const double batch_seconds = loader_time_->take();
  const LoaderAdvice loader = advise_loader(phases[0], phases[1] + phases[2] + phases[3], batch_seconds);
  std::optional<double> kernel_seconds_per_step;  // --profile-kernels, where the profiler saw kernels
  if (stats.kernel_profile && stats.kernel_profile->kernels > 0)
    kernel_seconds_per_step = stats.kernel_profile->device_seconds / steps;
  if (writer_) {
    append_line(ModelFiles{output_dir_}.training_log(),
                format_training_log_line(
                    {epoch, report_.last_epoch_loss, stats.lr, stats.wd, entropy_epoch, kl_epoch, knn_top1}));
    MetricsRecord record;
    record.kind = MetricsRecord::Kind::kEpoch, record.epoch = epoch;
    record.loss = report_.last_epoch_loss, record.teacher_entropy = entropy_epoch, record.kl = kl_epoch;
    record.lr = stats.lr, record.wd = stats.wd, record.momentum = stats.momentum,
    record.online_knn_top1 = knn_top1;
    record.images_per_second = images_per_second, record.eta_seconds = eta;
    record.seconds_per_step = {phases[0], phases[1], phases[2], phases[3]};
    record.phase_clock = phase_clock_->source();
    record.kernel_seconds_per_step = kernel_seconds_per_step;
    if (std::isfinite(batch_seconds)) record.loader_seconds_per_batch = batch_seconds;
    append_line(metrics_file_, format_metrics_record(record));
  }
  if (kernel_seconds_per_step) {
    spdlog::info(
        "epoch {}/{}: kernel time per step {:.4f} s ({:.0f} kernels a step, CUPTI): the step's floor; the "
        "profiled step took {:.4f} s",
        epoch + 1, epochs, *kernel_seconds_per_step,
        static_cast<double>(stats.kernel_profile->kernels) / steps, stats.seconds / steps);
  } else if (stats.kernel_profile) {
    spdlog::warn(
        "epoch {}/{}: --profile-kernels: the profiler recorded no kernel (is CUPTI, libcupti.so, where "
        "LibTorch looks for it?)",
        epoch + 1, epochs);
  }
  spdlog::info(
      "epoch {}/{}: seconds per step ({}): data wait {:.3f}, forward {:.3f}, backward {:.3f}, update "
      "{:.3f}",
      epoch + 1, epochs, phase_clock_->source(), phases[0], phases[1], phases[2], phases[3]);
  if (loader.warn && std::isfinite(batch_seconds)) {
    spdlog::warn(
        "epoch {}/{}: the step waited for data {:.0f}% of its time: a loader thread makes a batch in {:.3f} "
        "s, "
        "the step computes one in {:.3f} s, so about {} loader thread(s) would feed it (this run: {}; "
        "--loader-threads or train_scDINO.num_workers, each a core beside the step's: docs/scale.md)",
        epoch + 1, epochs, 100 * loader.wait_share, batch_seconds, phases[1] + phases[2] + phases[3],
        loader.threads_needed, loader_threads_);
  }
  spdlog::info("epoch {}/{}: loss {:.4f} lr {:.3g} wd {:.3g} momentum {:.5f} {:.1f} images/s ETA {:.0f} s",
               epoch + 1, epochs, report_.last_epoch_loss, stats.lr, stats.wd, stats.momentum,
               images_per_second, eta);
  spdlog::info("epoch {}/{}: teacher entropy {:.4f} nats (uniform: {:.4f}), teacher-student KL {:.4f}",
               epoch + 1, epochs, entropy_epoch, std::log(static_cast<double>(h_.out_dim)), kl_epoch);
}

TrainReport Training::run() {
  set_up_threads();
  // From the start: a job that never reaches its first step looks hung to the alert rules.
  prometheus_ = std::make_unique<monitoring::MetricsFile>(
      monitoring::MetricsFileOptions{c_.monitoring.textfile_dir, c_.monitoring.interval_seconds},
      monitoring::labels_from_environment("train", rank_));
  prometheus_->set_to_now("pcdino_train_last_step_timestamp_seconds");
  if (writer_) prometheus_->set_to_now("pcdino_train_last_checkpoint_timestamp_seconds");
  set_up_device();
  torch::manual_seed(c_.meta.seed);
  stop_requested.store(false);
  set_up_data();
  set_up_models();
  set_up_run_folder();
  resume();
  choose_cpu_precision();
  set_up_data_parallel();
  crops_ = multi_crop_options(c_, ms_);
  transform_ = ImageTransform{c_.selected_channels(), c_.meta.center_crop};
  set_up_online_knn();
  set_up_epoch_context();
  set_up_time_budget();
  // --loader-threads, else train_scDINO.num_workers (DataLoader's workers; 0, loading in the training
  // process, is one thread here).
  loader_threads_ = rt_.loader_threads > 0 ? rt_.loader_threads : std::max(1, c_.train.num_workers);
  for (int epoch = state_.epoch; epoch < ctx_->epochs; ++epoch) {
    const auto epoch_started = Clock::now();
    const std::size_t first_iter = epoch == state_.epoch ? static_cast<std::size_t>(state_.iteration) : 0;
    Prefetcher<Batch> loader(niter_ - first_iter, batches(epoch, first_iter), loader_threads_, 4);
    // --profile-kernels: the run's last epoch (a benchmark's warm one) under the profiler.
    std::optional<KernelProfile> profile;
    if (rt_.profile_kernels && epoch + 1 == ctx_->epochs) profile.emplace(true);
    EpochStats stats = train_one_epoch(*ctx_, loader, epoch, first_iter);
    if (profile) stats.kernel_profile = profile->stop();
    if (stats.stopped_after) return stop(epoch, *stats.stopped_after);
    end_epoch(epoch, stats, epoch_started, first_iter);
  }
  if (staged_) staged_->release(!c_.train.keep_staged_dataset);
  report_.epochs_done = state_.epoch;
  report_.images_per_second = static_cast<double>(ctx_->iterations_this_run) *
                              static_cast<double>(global_batch_) / std::max(seconds_this_run_, 1e-9);
  return report_;
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

TrainReport run_training(const PipelineConfig& c, const TrainRuntime& rt, const MpiWorld* world) {
  return Training(c, rt, world).run();
}

}  // namespace pcdino::train
