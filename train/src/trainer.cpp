#include "pcdino/train/trainer.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/monitoring/metrics.hpp"
#include "pcdino/train/augment.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/comm.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/fusion.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/online_knn.hpp"
#include "pcdino/train/phase_clock.hpp"
#include "pcdino/train/process.hpp"
#include "pcdino/train/schedules.hpp"
#include "pcdino/train/step_graph.hpp"
#include "pcdino/train/watchdog.hpp"

namespace pcdino::train {

namespace fs = std::filesystem;

namespace {

std::atomic<bool> stop_requested{false};

// How long ranks asked to stop wait for the others to agree before they take a peer for lost (Watchdog):
// longer than rank 0's work at an epoch's end (checkpoint, online kNN) that the others wait for, and half
// of the 120 s that a time limit's SIGUSR1 comes early by default (slurm.signal_seconds).
constexpr double kStopAgreementSeconds = 60;

extern "C" void on_stop_signal(int) {
  stop_requested.store(true);
}

// One batch of crops: crops[k] is [B, C, S_k, S_k].
using Batch = std::vector<torch::Tensor>;

// `pinned`: page-locked host memory, so that the copy to a GPU overlaps with compute.
Batch make_batch(const Dataset& ds, const std::vector<std::size_t>& indices, const ImageTransform& transform,
                 const MultiCropOptions& crops, std::uint64_t seed, int epoch, bool pinned) {
  std::vector<std::vector<Image>> per_sample;
  for (std::size_t idx : indices) {
    const Image image = ds.load(idx, transform);
    // Every image must have the channels the normalisation has (or the batch's first one has).
    const std::size_t channels = !crops.mean.empty()  ? crops.mean.size()
                                 : per_sample.empty() ? std::size_t(image.channels)
                                                      : std::size_t(per_sample.front().front().channels);
    if (std::size_t(image.channels) != channels) {
      throw DataError(ds.source(idx) + " has " + std::to_string(image.channels) + " channel(s) after " +
                      "meta.selected_channel_combination_per_run, the dataset's other images " +
                      std::to_string(channels) +
                      " (`pcdino dataset check` lists the images by channel count)");
    }
    per_sample.push_back(multi_crop(image, crops, sample_seed(seed, epoch, idx)));
  }
  Batch batch;
  for (std::size_t k = 0; k < per_sample.front().size(); ++k) {
    const Image& first = per_sample.front()[k];
    auto t = torch::empty({static_cast<int64_t>(indices.size()), first.channels, first.height, first.width},
                          torch::TensorOptions().pinned_memory(pinned));
    for (std::size_t b = 0; b < per_sample.size(); ++b) {
      std::memcpy(t[static_cast<int64_t>(b)].data_ptr<float>(), per_sample[b][k].data.data(),
                  per_sample[b][k].data.size() * sizeof(float));
    }
    batch.push_back(t);
  }
  return batch;
}

void append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw CantCreateError("cannot append to '" + path + "'");
  out << line << "\n";
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

// Several ranks: every rank's generator states into `state` on the writer (each rank's drop path draws
// its own), so that a resumed run continues every rank's random stream. Called by all ranks together.
void gather_generator_states(const MpiWorld* world, const torch::Device& device, CheckpointState& state) {
  if (!world || world->size() <= 1) return;
  const auto to_bytes = [](const torch::Tensor& t) {
    const auto dense = t.contiguous();
    return std::string(static_cast<const char*>(dense.data_ptr()), static_cast<std::size_t>(dense.numel()));
  };
  const auto to_tensor = [](const std::string& bytes) {
    return torch::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())},
                            torch::kUInt8)
        .clone();
  };
  const auto cpu = world->gather(to_bytes(at::detail::getDefaultCPUGenerator().get_state()));
  const auto gpu = world->gather(
      device.is_cuda() ? to_bytes(at::globalContext().defaultGenerator(device).get_state()) : std::string());
  state.rank_rng_states.clear();
  state.rank_cuda_rng_states.clear();
  for (std::size_t r = 0; r < cpu.size(); ++r) {
    state.rank_rng_states.push_back(to_tensor(cpu[r]));
    if (device.is_cuda()) state.rank_cuda_rng_states.push_back(to_tensor(gpu[r]));
  }
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

// What train_one_epoch works with (main_dino.py's train_one_epoch arguments): run_training's setup builds
// it and owns what it refers to.
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
  PhaseClock* clock = nullptr;  // times the phases of each step
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

// What train_one_epoch gathered (MetricLogger's meters) for the end of the epoch.
struct EpochStats {
  double loss_sum = 0;
  std::size_t loss_count = 0;
  PhaseSeconds phases{};                // summed over the epoch's steps (PhaseClock::collect)
  double lr = 0, wd = 0, momentum = 0;  // of the last iteration
  double seconds = 0;                   // the epoch's wall time
  // Set when all ranks stopped on request (a signal, stop_after_iterations): the epoch's iterations done.
  std::optional<std::size_t> stopped_after;
  std::vector<double> window_step_seconds;  // each full 10-iteration window's seconds per step
};

// The iterations epoch `epoch` runs: all of them, or up to the run's last step in the last epoch of a cut.
std::size_t epoch_iterations(const EpochContext& ctx, int epoch) {
  const std::size_t first = static_cast<std::size_t>(epoch) * ctx.niter;
  return ctx.cut.steps <= first ? 0 : std::min(ctx.niter, ctx.cut.steps - first);
}

// Whether this step is --cuda-graph's: from the epoch the last layer trains (before it its gradients are
// dropped, which a graph cannot do), and crops of the graph's shapes (made from the first such step's).
bool graphed_step(EpochContext& ctx, int epoch, const Batch& crops) {
  if (!ctx.graph_step || epoch < ctx.freeze_last_layer) return false;
  if (ctx.graph_inputs.empty()) {
    for (const auto& t : crops)
      ctx.graph_inputs.push_back(torch::empty(t.sizes(), t.options().device(ctx.device)));
  }
  if (crops.size() != ctx.graph_inputs.size()) return false;
  for (std::size_t k = 0; k < crops.size(); ++k) {
    if (crops[k].sizes() != ctx.graph_inputs[k].sizes()) return false;
  }
  return true;
}

// One DINO step on `crops` (on the device): teacher and student forward, the loss (summed into ctx's
// `entropy_sum` and `window_loss_sum`), backward averaged over ranks, unscaling, clipping, the frozen last
// layer, the AdamW step and the teacher's EMA; `lap` marks the end of each phase. With
// `schedule_on_device` the update reads lr, weight decay and momentum from ctx's device scalars, which is
// the step a CUDA graph captures (where the scaler and the frozen layer do nothing, and the fusion's and
// the centre's allreduces are captured with the rest).
void dino_step(EpochContext& ctx, const Batch& crops, int epoch, int schedule_epoch, double momentum,
               bool schedule_on_device, const std::function<void(Phase)>& lap) {
  torch::Tensor value;
  {
    const AutocastGuard autocast(ctx.amp, ctx.device.type());
    const auto teacher_out = ctx.teacher->forward(Batch(crops.begin(), crops.begin() + 2));
    const auto student_out = ctx.student->forward(crops);
    value = ctx.loss(student_out, teacher_out, schedule_epoch, ctx.allreduce_sum, ctx.ranks,
                     schedule_on_device ? ctx.teacher_temp_t : torch::Tensor());
  }
  ctx.entropy_sum.add_(ctx.loss.teacher_entropy);
  ctx.window_loss_sum.add_(value.detach());
  lap(Phase::kForward);
  ctx.optimizer.zero_grad();
  ctx.scaler.scale(value).backward();
  if (ctx.fusion) ctx.fusion->finish();  // the gradients averaged over ranks
  lap(Phase::kBackward);
  const bool finite = ctx.scaler.unscale(ctx.student->parameters());
  if (ctx.clip_grad > 0) clip_gradients(*ctx.student, ctx.clip_grad);
  cancel_gradients_last_layer(epoch, ctx.student, ctx.freeze_last_layer);
  if (schedule_on_device) {
    ctx.optimizer.step_on_device(ctx.lr_t, ctx.wd_t);
    ema_update(*ctx.teacher, *ctx.student, ctx.momentum_t);
  } else {
    if (finite) ctx.optimizer.step();  // a float16 overflow skips the step, as GradScaler.step does
    ctx.scaler.update(!finite);
    ema_update(*ctx.teacher, *ctx.student, momentum);
  }
  lap(Phase::kUpdate);
}

// The Prometheus metrics of one finished step: `images` of this rank, its learning rate, its host seconds.
void record_step(EpochContext& ctx, int64_t images, double lr, double seconds) {
  monitoring::MetricsFile& m = *ctx.prometheus;
  m.add("pcdino_train_steps_total", 1);
  m.add("pcdino_train_samples_total", static_cast<double>(images));
  m.observe("pcdino_train_step_duration_seconds", seconds);
  m.set("pcdino_train_learning_rate", lr);
  m.set_to_now("pcdino_train_last_step_timestamp_seconds");
  if (ctx.fusion) m.add("pcdino_train_allreduce_bytes_total", ctx.allreduce_bytes_per_step);
}

// The phases' seconds since the last reading (`before` to `after`, PhaseClock::collect's sums) and the time
// waited in collectives since then, into the Prometheus counters.
void record_window(EpochContext& ctx, const PhaseSeconds& before, const PhaseSeconds& after) {
  static constexpr const char* kNames[kPhaseCount] = {"data", "forward", "backward", "update"};
  monitoring::MetricsFile& m = *ctx.prometheus;
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    m.add("pcdino_train_phase_seconds_total", std::max(0.0, after[p] - before[p]), kNames[p]);
  double waited = ctx.comm_wait_seconds;
  ctx.comm_wait_seconds = 0;
  if (ctx.fusion) waited += ctx.fusion->take_wait_seconds();
  m.add("pcdino_train_allreduce_wait_seconds_total", waited);
}

// One epoch from iteration `first_iter` on (main_dino.py's train_one_epoch): per iteration the schedules'
// lr, weight decay and momentum, teacher and student forward, DINO loss, backward (averaged over ranks),
// clipping, the frozen last layer, AdamW step, EMA of the teacher, and a metrics record every 10
// iterations. `loader` gives the epoch's batches from `first_iter`. Returns early, with `stopped_after`,
// when all ranks agree to stop. Throws DataError for a non-finite loss.
//
// The step never waits for the device: the losses and teacher entropies are summed there and read every
// 10 iterations, at the epoch's end and before a stop (main_dino.py reads loss.item() every step), so a
// non-finite loss is found at the next reading, before anything is written.
EpochStats train_one_epoch(EpochContext& ctx, Prefetcher<Batch>& loader, int epoch, std::size_t first_iter) {
  EpochStats stats;
  ctx.entropy_sum.zero_(), ctx.window_loss_sum.zero_();
  double window_entropy_start = 0;
  std::size_t window_count = 0, window_first = first_iter;
  const auto epoch_start = std::chrono::steady_clock::now();
  auto window_start = epoch_start;
  // The bound is read again after each step: the time budget's first estimate may end this epoch early.
  for (std::size_t it = first_iter; it < epoch_iterations(ctx, epoch); ++it) {
    const std::size_t global_it = static_cast<std::size_t>(epoch) * ctx.niter + it;
    const std::size_t at = ctx.cut.index(global_it);  // the schedules' index (global_it unless cut)
    const int schedule_epoch = static_cast<int>(at / ctx.niter);
    const double lr = ctx.lr_schedule[at], wd = ctx.wd_schedule[at], momentum = ctx.momentum_schedule[at];
    const double teacher_temp = ctx.loss.teacher_temperature(schedule_epoch);
    stats.lr = lr, stats.wd = wd, stats.momentum = momentum;
    auto& g = ctx.optimizer.param_groups();
    static_cast<torch::optim::AdamWOptions&>(g[0].options()).lr(lr).weight_decay(wd);
    static_cast<torch::optim::AdamWOptions&>(g[1].options()).lr(lr).weight_decay(0.0);

    PhaseClock& clock = *ctx.clock;
    const auto step_start = std::chrono::steady_clock::now();
    clock.start();
    Batch crops_batch = *loader.next();
    if (graphed_step(ctx, epoch, crops_batch)) {
      // The crops and schedules into the graph's static tensors, then the whole step in one replay.
      for (std::size_t k = 0; k < crops_batch.size(); ++k)
        ctx.graph_inputs[k].copy_(crops_batch[k], /*non_blocking=*/true);
      ctx.lr_t.fill_(lr), ctx.wd_t.fill_(wd), ctx.momentum_t.fill_(momentum);
      ctx.teacher_temp_t.fill_(teacher_temp);
      clock.lap(Phase::kData);
      const auto step = [&] {
        try {
          dino_step(ctx, ctx.graph_inputs, epoch, schedule_epoch, momentum, true, [](Phase) {});
        } catch (...) {
          // A capture ends cleanly only with NCCL's stream joined back, and the eager step that follows
          // a failed capture must send every gradient buffer, as the other ranks do.
          if (ctx.fusion) ctx.fusion->abandon();
          throw;
        }
      };
      if (ctx.graph) {
        ctx.graph->run(step);
      } else {
        step();
      }
      ctx.optimizer.advance_host_steps();
      // One replay has no phases: all of it is counted as forward.
      clock.lap(Phase::kForward), clock.lap(Phase::kBackward), clock.lap(Phase::kUpdate);
    } else {
      for (auto& t : crops_batch) t = t.to(ctx.device, /*non_blocking=*/true);
      clock.lap(Phase::kData);
      dino_step(ctx, crops_batch, epoch, schedule_epoch, momentum, false,
                [&clock](Phase phase) { clock.lap(phase); });
    }
    ++stats.loss_count;
    ++ctx.iterations_this_run;
    ++window_count;
    bool stop = stop_requested.load() ||
                (ctx.stop_after_iterations > 0 && ctx.iterations_this_run >= ctx.stop_after_iterations);
    // Slurm signals every task, not at the same instant: all ranks stop after the same iteration.
    if (ctx.ranks > 1) {
      const auto agreement = std::chrono::steady_clock::now();
      stop = ctx.world->allreduce_max(stop ? 1 : 0) > 0;
      ctx.comm_wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - agreement).count();
      ctx.watchdog->progress("epoch " + std::to_string(epoch + 1) + " iteration " + std::to_string(it + 1));
    }
    record_step(ctx, crops_batch.front().size(0), lr,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
    // One reading every 10 iterations (DINO's MetricLogger print_freq), at the epoch's end and on a stop.
    const std::size_t last = epoch_iterations(ctx, epoch);
    if ((it + 1) % 10 == 0 || it + 1 == last || stop) {
      const double window_loss = ctx.window_loss_sum.item<double>();
      const PhaseSeconds phases_before = stats.phases;
      clock.collect(stats.phases);
      record_window(ctx, phases_before, stats.phases);
      if (!std::isfinite(window_loss)) {
        throw DataError("loss is " + std::to_string(window_loss) + " in epoch " + std::to_string(epoch) +
                        " iterations " + std::to_string(window_first) + "-" + std::to_string(it) +
                        ": stopping training (lower lr or use clip_grad)");
      }
      ctx.window_loss_sum.zero_();
      stats.loss_sum += window_loss;
      // A stop's part-window is read (the non-finite check) but not recorded.
      const bool full_window = (it + 1) % 10 == 0 || it + 1 == last;
      if (full_window && (ctx.writer || ctx.prometheus->enabled())) {
        const double entropy_total = ctx.entropy_sum.item<double>();
        const double window_entropy =
            (entropy_total - window_entropy_start) / static_cast<double>(window_count);
        const double mean_loss = window_loss / static_cast<double>(window_count);
        window_entropy_start = entropy_total;
        ctx.prometheus->set("pcdino_train_loss", mean_loss);
        ctx.prometheus->set("pcdino_train_teacher_entropy", window_entropy);
        ctx.prometheus->set("pcdino_train_kl_divergence", mean_loss - window_entropy);
        if (ctx.writer) {
          MetricsRecord record;
          record.kind = MetricsRecord::Kind::kIteration, record.epoch = epoch;
          record.iteration = static_cast<long>(global_it) + 1;
          record.loss = mean_loss, record.teacher_entropy = window_entropy,
          record.kl = mean_loss - window_entropy;
          record.lr = lr, record.wd = wd, record.momentum = momentum;
          append_line(ctx.metrics_file, format_metrics_record(record));
        }
      }
      // The window's wall time per step: read after the loss, so a device's queued work is in it.
      const auto now = std::chrono::steady_clock::now();
      if (full_window && !stop) {
        stats.window_step_seconds.push_back(std::chrono::duration<double>(now - window_start).count() /
                                            static_cast<double>(window_count));
        if (ctx.on_window) ctx.on_window(global_it + 1, stats.window_step_seconds);
      }
      window_start = now;
      window_count = 0;
      window_first = it + 1;
    }
    if (ctx.writer && (it + 1) % 10 == 0 && it + 1 < epoch_iterations(ctx, epoch)) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      const double per_step = elapsed / static_cast<double>(it + 1 - first_iter);
      const double remaining = static_cast<double>(ctx.cut.steps - global_it - 1);
      spdlog::info("epoch {}/{} iteration {}/{}: loss {:.4f} {:.1f} images/s ETA {:.0f} s", epoch + 1,
                   ctx.epochs, it + 1, epoch_iterations(ctx, epoch),
                   stats.loss_sum / static_cast<double>(stats.loss_count),
                   static_cast<double>(ctx.global_batch) / per_step, remaining * per_step);
    }
    if (stop) {
      stats.stopped_after = it + 1;
      return stats;
    }
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
  return stats;
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

// The start of the Slurm job this process belongs to, as a checkpoint's tags name it ("" outside Slurm).
struct JobStart {
  std::string job_id;
  long restart = 0;  // SLURM_RESTART_COUNT: 0 for the first start, +1 for each requeue
};

JobStart this_job_start() {
  JobStart start;
  if (const char* id = std::getenv("SLURM_JOB_ID")) start.job_id = id;
  if (const char* count = std::getenv("SLURM_RESTART_COUNT")) start.restart = std::strtol(count, nullptr, 10);
  return start;
}

// Writes `path` keeping the checkpoint it replaces as `previous` (a hard link first, so that `path` never
// goes missing), unless `path` was written by a later start of the same Slurm job: a rank of an earlier
// start that was stopped (SIGSTOP, a hung node) and resumed after the requeue is stale, and throws
// DataError instead of replacing the newer run's checkpoint.
void save_latest_checkpoint(const std::string& path, const std::string& previous, MultiCropWrapper& student,
                            MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                            const DinoLoss& loss, const CheckpointState& state) {
  if (fs::exists(path)) {
    const JobStart ours = this_job_start();
    if (!ours.job_id.empty()) {
      std::map<std::string, std::string> theirs;
      try {
        theirs = read_checkpoint_state(path).args;
      } catch (const Error&) {
        // A torn checkpoint is replaced.
      }
      const auto job = theirs.find("slurm_job_id"), restart = theirs.find("slurm_restart_count");
      if (job != theirs.end() && restart != theirs.end() && job->second == ours.job_id &&
          std::strtol(restart->second.c_str(), nullptr, 10) > ours.restart) {
        throw DataError(path + " was written by start " + std::to_string(std::stol(restart->second) + 1) +
                        " of job " + ours.job_id + " (" + theirs["writer"] + "); this process of start " +
                        std::to_string(ours.restart + 1) + " is stale and does not replace it");
      }
    }
    // Already the same file when a write was cut short after this step (rename() of two links to one
    // file does nothing and would leave the temporary link behind).
    if (!fs::exists(previous) || !fs::equivalent(path, previous)) {
      const std::string link = temporary_name(previous);
      fs::remove(link);  // a link left by a killed process of the same pid
      fs::create_hard_link(path, link);
      rename_into_place(link, previous);
    }
  }
  save_checkpoint(path, student, teacher, optimizer, loss, state);
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

// The arguments that make a checkpoint this run's: a checkpoint written with other values is another
// run's (a copied or mixed-up folder), not one to resume. The epochs, the batch and the world size may
// change between starts.
constexpr const char* kRunArgs[] = {"arch", "patch_size", "out_dim", "in_chans", "seed"};

// Loads the newest checkpoint of `candidates` (checkpoint.pth, then the one before it) that can be read
// and is this run's (`args`, kRunArgs): a torn, unreadable or foreign one is skipped with the reason. All
// ranks load the same file. Returns its path, "" when none exists; throws the first one's error when none
// can be loaded.
std::string load_newest_checkpoint(const std::vector<std::string>& candidates,
                                   const std::map<std::string, std::string>& args, MultiCropWrapper& student,
                                   MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                                   DinoLoss& loss, const MpiWorld* world, int rank, int ranks,
                                   CheckpointState& state) {
  const auto try_load = [&](std::size_t i, std::string& error) {
    try {
      state = load_checkpoint(candidates[i], student, teacher, optimizer, loss, rank, ranks);
    } catch (const Error& e) {
      error = e.what();
      return false;
    }
    for (const char* key : kRunArgs) {
      const auto theirs = state.args.find(key);
      const auto ours = args.find(key);
      if (theirs == state.args.end() || ours == args.end() || theirs->second == ours->second) continue;
      error = candidates[i] + ": another run's checkpoint (" + key + " " + theirs->second + ", this run's " +
              ours->second + ")";
      return false;
    }
    return true;
  };
  long long chosen = -1;
  std::string first_error;
  for (std::size_t i = 0; i < candidates.size() && chosen < 0; ++i) {
    if (!fs::exists(candidates[i])) continue;
    std::string error;
    if (try_load(i, error)) {
      chosen = static_cast<long long>(i);
    } else {
      spdlog::warn("not resuming from {}: {}", candidates[i], error);
      if (first_error.empty()) first_error = error;
    }
  }
  // A rank that could read a newer file than another takes the other's (the one every rank can read).
  constexpr long long kNoneLoads = 1000;  // every file there refused: the largest, so that all ranks stop
  const long long mine = chosen < 0 && !first_error.empty() ? kNoneLoads : chosen;
  const long long agreed = world && ranks > 1 ? world->allreduce_max(mine) : mine;
  if (agreed == kNoneLoads) {
    throw DataError(first_error.empty() ? "another rank could not load any checkpoint" : first_error);
  }
  if (agreed < 0) return "";
  const auto index = static_cast<std::size_t>(agreed);
  if (agreed != chosen) {
    std::string error;
    if (!try_load(index, error)) throw DataError(error);
  }
  return candidates[index];
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGUSR1, on_stop_signal);
}

TrainReport run_training(const PipelineConfig& c, const TrainRuntime& rt, const MpiWorld* world) {
  const auto started = std::chrono::steady_clock::now();  // train_scDINO.time_budget_minutes counts from here
  const DinoHyperparameters& h = c.train.hyperparameters;
  if (rt.threads > 0) torch::set_num_threads(rt.threads);
  const int ranks = world ? world->size() : 1, rank = world ? world->rank() : 0;
  if (const int blas = share_blas_threads(world ? world->local_size() : 1, rt.threads);
      blas > 0 && ranks > 1) {
    spdlog::info("OpenBLAS threads per rank: {} ({} rank(s) on this machine)", blas, world->local_size());
  }
  if (torch::get_num_threads() > 1) {  // how idle OpenMP threads wait decides the step on few cores
    const char *policy = std::getenv("OMP_WAIT_POLICY"), *spin = std::getenv("GOMP_SPINCOUNT");
    spdlog::info("OpenMP: {} threads, OMP_WAIT_POLICY={} GOMP_SPINCOUNT={}", torch::get_num_threads(),
                 policy ? policy : "(unset)", spin ? spin : "(unset)");
  }
  const bool writer = rank == 0;  // one rank writes checkpoints and logs
  // From the start: a job that never reaches its first step looks hung to the alert rules.
  monitoring::MetricsFile prometheus({c.monitoring.textfile_dir, c.monitoring.interval_seconds},
                                     monitoring::labels_from_environment("train", rank));
  prometheus.set_to_now("pcdino_train_last_step_timestamp_seconds");
  if (writer) prometheus.set_to_now("pcdino_train_last_checkpoint_timestamp_seconds");
  const torch::Device device = select_device(device_option(rt.device, c.slurm.accelerator),
                                             world ? world->local_rank() : rt.local_rank);
  auto amp = h.use_fp16 ? autocast_dtype(device, rt.amp_dtype) : std::nullopt;
  // --cuda-graph's conditions, before anything is written.
  std::unique_ptr<StepGraph> graph;
  if (rt.cuda_graph) {
    if (amp == torch::kHalf) {
      throw ConfigError(
          "--cuda-graph: not with float16 autocast (its loss scaling decides on the host "
          "whether a step is skipped); use --amp-dtype bfloat16 or use_fp16: false");
    }
    StepGraph::AllRanks all_ranks;
    if (ranks > 1) {  // every rank keeps its graph, or none does
      all_ranks = [world](bool captured) { return world->allreduce_max(captured ? 0 : 1) == 0; };
    }
    graph = std::make_unique<StepGraph>(device, 3, all_ranks);
  }
  torch::manual_seed(c.meta.seed);
  stop_requested.store(false);

  const Dataset ds = Dataset::open(c.meta);
  std::vector<std::size_t> train =
      train_heldout_split(ds.size(), c.meta.train_datasetsplit_fraction, c.meta.seed).train;
  if (rt.limit_images > 0 && static_cast<std::size_t>(rt.limit_images) < train.size())
    train.resize(rt.limit_images);
  const RunLayout layout(c);
  const MeanStdValues ms = read_mean_std(layout.mean_std);
  const int batch = c.train.batch_size_per_gpu;
  // Each step takes batch * ranks images of the epoch's permutation; rank r the r-th of every `ranks`
  // (DistributedSampler's interleaving), so a step sees the same images whatever the number of ranks.
  const std::size_t global_batch = static_cast<std::size_t>(batch) * static_cast<std::size_t>(ranks);
  const std::size_t niter = train.size() / global_batch;  // drop_last, as the reference
  if (niter == 0) {
    throw ConfigError(c.source + ": train_scDINO.batch_size_per_gpu " + std::to_string(batch) + " x " +
                      std::to_string(ranks) + " rank(s) is larger than the training split (" +
                      std::to_string(train.size()) + " images)");
  }

  const VitOptions vo = VitOptions::from_config(h, static_cast<int>(ms.mean.size()));
  MultiCropWrapper student(VisionTransformer(vo), DinoHead(vo.embed_dim, h.out_dim, h.norm_last_layer));
  VitOptions to = vo;
  to.drop_path_rate = 0;
  MultiCropWrapper teacher(VisionTransformer(to), DinoHead(vo.embed_dim, h.out_dim));
  {
    torch::NoGradGuard no_grad;
    auto t = teacher->parameters(), s = student->parameters();
    for (std::size_t i = 0; i < t.size(); ++i) t[i].copy_(s[i]);
  }
  for (auto& p : teacher->parameters()) p.set_requires_grad(false);
  TrainReport report;
  DinoLoss loss(h.out_dim, h.local_crops_number + 2, h.warmup_teacher_temp, h.teacher_temp,
                h.warmup_teacher_temp_epochs, c.train.epochs);
  // Models are built on the CPU, so that a seed gives the same initial weights on every device.
  student->to(device);
  teacher->to(device);
  loss.center = loss.center.to(device);
  GradScaler scaler(amp == torch::kHalf);
  std::unique_ptr<Communicator> comm;
  if (ranks > 1) comm = make_communicator(*world, device);
  if (graph && comm && !comm->graph_capturable()) {  // the gradients' and the centre's allreduce are in it
    throw ConfigError("--cuda-graph with " + std::to_string(ranks) +
                      " ranks: the collectives are captured with the step, which needs NCCL 2.9.6 or later, "
                      "CUDA 11.3 or later and a LibTorch with CUDA; this is " +
                      comm->version() + ": run without --cuda-graph or on one rank");
  }
  if (device.is_cuda()) {
    spdlog::info("training on {} with {}", device.str(),
                 amp ? std::string("autocast to ") + c10::toString(*amp) +
                           (scaler.enabled() ? " and loss scaling" : "")
                     : std::string("float32 (use_fp16 false)"));
  } else if (amp && rt.amp_dtype != "auto") {
    spdlog::info("training on the CPU with autocast to {} (--amp-dtype)", c10::toString(*amp));
  }
  MultiTensorAdamW optimizer(params_groups(student), torch::optim::AdamWOptions(0.0));

  int epochs = c.train.epochs;  // cut by train_scDINO.time_budget_minutes once decided
  ScheduleCut resumed_cut;      // the cut of an earlier start (steps 0: none)
  if (h.warmup_epochs > epochs) {
    throw ConfigError(c.source + ": train_scDINO.hyperparameters.warmup_epochs (" +
                      std::to_string(h.warmup_epochs) + ") is larger than train_scDINO.epochs (" +
                      std::to_string(epochs) + ")");
  }

  report.output_dir = rt.output_dir.empty() ? layout.model.dir : rt.output_dir;
  const ModelFiles model_files{report.output_dir};
  make_directories(report.output_dir);
  if (rank == 0) {  // the folder's one writer, before it writes
    for (const auto& file : remove_temporaries(report.output_dir, ModelFiles::kCheckpointPrefix))
      spdlog::info("removed {}: a checkpoint write cut short (its process was killed)", file);
  }
  const std::string checkpoint = model_files.checkpoint();
  const std::string previous_checkpoint = model_files.previous_checkpoint();
  CheckpointState state;
  state.args = {{"arch", h.arch},
                {"patch_size", std::to_string(h.patch_size)},
                {"out_dim", std::to_string(h.out_dim)},
                {"in_chans", std::to_string(vo.in_channels)},
                {"epochs", std::to_string(epochs)},
                {"batch_size_per_gpu", std::to_string(batch)},
                {"world_size", std::to_string(ranks)},
                {"seed", std::to_string(c.meta.seed)},
                {"global_crops_size", std::to_string(h.global_crops_size)},
                {"local_crops_size", std::to_string(h.local_crops_size)},
                {"local_crops_number", std::to_string(h.local_crops_number)}};
  // Tagged with the Slurm job's start and the writer, so that a stale process of an earlier start is
  // found (save_latest_checkpoint).
  const JobStart job_start = this_job_start();
  if (!job_start.job_id.empty()) {
    state.args["slurm_job_id"] = job_start.job_id;
    state.args["slurm_restart_count"] = std::to_string(job_start.restart);
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    state.args["writer"] = std::string(host) + " pid " + std::to_string(::getpid());
  }
  if (rt.resume) {
    auto args = state.args;
    const std::string loaded = load_newest_checkpoint({checkpoint, previous_checkpoint}, args, student,
                                                      teacher, optimizer, loss, world, rank, ranks, state);
    if (!loaded.empty()) {
      // A cut the time budget made in an earlier start holds: the steps so far read schedules cut for it.
      if (c.train.time_budget_minutes > 0) {
        const auto steps = state.args.find(kBudgetStepsArg), from = state.args.find(kScheduleCutArg);
        const auto legacy = state.args.find(kBudgetEpochsArg);
        if (steps != state.args.end() && from != state.args.end()) {
          std::istringstream in(from->second);
          in >> resumed_cut.from_step >> resumed_cut.from_index;
          resumed_cut.steps = std::stoull(steps->second);
          for (const char* key : {kBudgetStepsArg, kScheduleCutArg, kBudgetEpochsArg, "epochs"})
            args[key] = state.args.at(key);
        } else if (legacy != state.args.end()) {
          epochs = std::min(epochs, std::max(state.epoch, std::stoi(legacy->second)));
          args[kBudgetEpochsArg] = args["epochs"] = std::to_string(epochs);
        }
      }
      if (const auto kept = state.args.find(kCpuPrecisionArg); kept != state.args.end())
        args[kCpuPrecisionArg] = kept->second;
      state.args = args;
      spdlog::info("resuming from {} at epoch {} iteration {}", loaded, state.epoch, state.iteration);
    }
    prometheus.set("pcdino_train_epoch", state.epoch);
  }
  if (h.use_fp16 && device.is_cpu() && rt.amp_dtype == "auto") {  // the faster precision, timed once a run
    const auto kept = state.args.find(kCpuPrecisionArg);
    if (kept != state.args.end()) {
      report.cpu_precision = kept->second;
    } else {
      std::tie(report.cpu_float32_images_per_second, report.cpu_bfloat16_images_per_second) =
          time_cpu_precisions(student, vo, h, batch, world, ranks);
      report.cpu_precision = report.cpu_bfloat16_images_per_second > report.cpu_float32_images_per_second
                                 ? "bfloat16"
                                 : "float32";
      state.args[kCpuPrecisionArg] = report.cpu_precision;
      spdlog::info(
          "use_fp16 on the CPU: the student's step timed at {:.1f} images/s in float32 and {:.1f} under "
          "bfloat16 autocast: training in {} (--amp-dtype chooses instead)",
          report.cpu_float32_images_per_second, report.cpu_bfloat16_images_per_second, report.cpu_precision);
    }
    amp = report.cpu_precision == "bfloat16" ? std::optional<torch::ScalarType>(torch::kBFloat16)
                                             : std::nullopt;
  }
  std::unique_ptr<GradientFusion> fusion;
  std::unique_ptr<Watchdog> watchdog;
  if (comm) {
    watchdog = std::make_unique<Watchdog>(rt.comm_timeout_seconds, rank, ranks, &stop_requested,
                                          std::min(rt.comm_timeout_seconds, kStopAgreementSeconds));
    fusion = start_data_parallel(*comm, student, teacher, loss, rt.fusion_threshold_mb);
    spdlog::info("{} ranks ({}), {} gradient buffer(s) of at most {} MiB, global batch {}", ranks,
                 comm->backend(), fusion->buckets().size(), rt.fusion_threshold_mb, global_batch);
  }

  const MultiCropOptions crops = multi_crop_options(c, ms);
  const ImageTransform transform{c.selected_channels(), c.meta.center_crop};

  // --loader-threads, else train_scDINO.num_workers (DataLoader's workers; 0, loading in the training
  // process, is one thread here).
  const int loader_threads = rt.loader_threads > 0 ? rt.loader_threads : std::max(1, c.train.num_workers);
  std::unique_ptr<OnlineKnn> online_knn;
  double untrained_knn_seconds = 0;  // what the time budget keeps for the last online kNN
  const std::string metrics_file = model_files.metrics();
  if (writer && h.online_knn_every > 0) {
    online_knn = std::make_unique<OnlineKnn>(ds, c, transform, ms, h.online_knn_images);
    if (state.epoch == 0 && state.iteration == 0) {  // the untrained teacher: the level to beat
      const auto knn_started = std::chrono::steady_clock::now();
      const double top1 = online_knn->top1(teacher->backbone, device);
      untrained_knn_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - knn_started).count();
      spdlog::info("online kNN top-1 before training {:.2f}% ({} held-out images, k {}, T {})", top1,
                   online_knn->images(), OnlineKnn::kK, OnlineKnn::kTemperature);
      MetricsRecord start;
      start.kind = MetricsRecord::Kind::kStart, start.online_knn_top1 = top1;
      append_line(metrics_file, format_metrics_record(start));
    }
  }

  // What every epoch uses: the schedules, per iteration of the whole run, and main_dino.py's other
  // train_one_epoch arguments.
  EpochContext ctx(student, teacher, loss, optimizer, scaler);
  ctx.fusion = fusion.get();
  if (fusion) {
    for (const auto& b : fusion->buckets())
      ctx.allreduce_bytes_per_step += static_cast<double>(b.flat.nbytes());
  }
  ctx.watchdog = watchdog.get();
  if (comm) {
    ctx.allreduce_sum = [&comm, &ctx](torch::Tensor& t) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<torch::Tensor> one{t};
      comm->allreduce(one, ReduceOp::kSum);
      ctx.comm_wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
  }
  const auto build_schedules = [&] {
    ctx.lr_schedule = cosine_schedule(scaled_learning_rate(h.lr, static_cast<int>(global_batch)), h.min_lr,
                                      epochs, niter, h.warmup_epochs);
    ctx.wd_schedule = cosine_schedule(h.weight_decay, h.weight_decay_end, epochs, niter);
    ctx.momentum_schedule = cosine_schedule(h.momentum_teacher, 1.0, epochs, niter);
    ctx.epochs = epochs;
  };
  build_schedules();
  const std::size_t full_steps = static_cast<std::size_t>(epochs) * niter;
  ctx.cut = ScheduleCut{0, 0, full_steps, full_steps};
  if (resumed_cut.steps > 0) {
    resumed_cut.full = full_steps;
    ctx.cut = resumed_cut;
    ctx.epochs = epochs = static_cast<int>((resumed_cut.steps + niter - 1) / niter);
  }
  ctx.world = world, ctx.ranks = ranks, ctx.writer = writer;
  ctx.device = device, ctx.amp = amp;
  const std::unique_ptr<PhaseClock> phase_clock_owner = make_phase_clock(device);
  PhaseClock& phase_clock = *phase_clock_owner;
  ctx.clock = &phase_clock;
  if (rt.cuda_graph || rt.graph_step_without_graph) {
    ctx.graph_step = true, ctx.graph = graph.get();
    // float64, as the host computes the schedules (1 - momentum near 1 keeps its digits).
    const auto scalar = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    ctx.lr_t = torch::zeros({}, scalar), ctx.wd_t = torch::zeros({}, scalar);
    ctx.momentum_t = torch::zeros({}, scalar);
    ctx.teacher_temp_t = torch::zeros({}, scalar.dtype(torch::kFloat32));
  }
  ctx.entropy_sum = torch::zeros({}, torch::TensorOptions().device(device));
  ctx.window_loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  ctx.clip_grad = h.clip_grad, ctx.freeze_last_layer = h.freeze_last_layer;
  ctx.niter = niter, ctx.global_batch = global_batch;
  ctx.stop_after_iterations = rt.stop_after_iterations;
  ctx.metrics_file = metrics_file;
  ctx.prometheus = &prometheus;

  Batch synthetic;  // --synthetic-crops: drawn from a generator of their own (the default one is the model's)
  if (rt.synthetic_crops) {
    synthetic = random_crops(h, vo.in_channels, batch, at::detail::createCPUGenerator(c.meta.seed));
    for (auto& t : synthetic) t = t.to(device);
    spdlog::warn("--synthetic-crops: training on {} random crops made once (a benchmark, not a model)",
                 synthetic.size());
  }

  double seconds_this_run = 0;
  // The start that makes the estimates: the first one of a run with a budget.
  const bool budget_open = c.train.time_budget_minutes > 0 && state.args.count(kBudgetEpochsArg) == 0;
  TimeBudget budget(c.train.time_budget_minutes * 60, started, full_steps, niter);
  budget.run_end_seconds = untrained_knn_seconds;
  // The steps rank 0 chose (the others pass 0) become the run's, its schedules read from `done` on.
  const auto apply_cut = [&](std::size_t done, std::size_t chosen, const char* when) {
    const auto steps = static_cast<std::size_t>(
        ranks > 1 ? world->allreduce_max(static_cast<long long>(chosen)) : static_cast<long long>(chosen));
    ctx.cut = ctx.cut.recut(done, steps);
    ctx.epochs = epochs = static_cast<int>((steps + niter - 1) / niter);
    state.args[kBudgetStepsArg] = std::to_string(steps);
    state.args[kScheduleCutArg] =
        std::to_string(ctx.cut.from_step) + " " + std::to_string(ctx.cut.from_index);
    state.args[kBudgetEpochsArg] = state.args["epochs"] = std::to_string(epochs);
    spdlog::info(
        "time_budget_minutes {:g}, {}: {:.0f} s so far, {:.3f} s a step: training {} of {} steps ({} epochs, "
        "the last of {} steps); the schedules run from index {} at step {} to their end at the last step",
        c.train.time_budget_minutes, when, budget.elapsed(), budget.last_step_seconds(), steps, full_steps,
        epochs, steps - static_cast<std::size_t>(epochs - 1) * niter, ctx.cut.from_index, done);
  };
  if (budget_open && state.iteration == 0) {
    ctx.on_window = [&](std::size_t done, const std::vector<double>& windows) {
      if (const auto steps = budget.after_window(done, windows))
        apply_cut(done, writer ? *steps : 0, "first estimate after a measured stretch");
    };
  }
  for (int epoch = state.epoch; epoch < epochs; ++epoch) {
    const auto epoch_started = std::chrono::steady_clock::now();
    const auto perm = numpy_permutation(train.size(), c.meta.seed + static_cast<std::uint32_t>(epoch));
    const std::size_t first_iter = epoch == state.epoch ? static_cast<std::size_t>(state.iteration) : 0;
    Prefetcher<Batch> loader(
        niter - first_iter,
        [&](std::size_t k) {
          if (rt.synthetic_crops) return synthetic;
          const std::size_t it = first_iter + k;
          std::vector<std::size_t> indices;
          for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b)
            indices.push_back(train[perm[(it * batch + b) * static_cast<std::size_t>(ranks) +
                                         static_cast<std::size_t>(rank)]]);
          return make_batch(ds, indices, transform, crops, c.meta.seed, epoch, device.is_cuda());
        },
        loader_threads, 4);
    EpochStats stats = train_one_epoch(ctx, loader, epoch, first_iter);
    if (stats.stopped_after) {
      const std::size_t done = *stats.stopped_after;
      state.epoch = epoch;
      state.iteration = static_cast<int>(done);
      if (state.iteration == static_cast<int>(niter)) state.epoch = epoch + 1, state.iteration = 0;
      gather_generator_states(world, device, state);
      if (writer)
        save_latest_checkpoint(checkpoint, previous_checkpoint, student, teacher, optimizer, loss, state);
      spdlog::warn("stopped at epoch {} iteration {}: checkpoint written to {}; resubmit to resume", epoch,
                   done, checkpoint);
      report.epochs_done = state.epoch;
      report.interrupted = true;
      return report;
    }
    seconds_this_run += stats.seconds;
    state.epoch = epoch + 1;
    state.iteration = 0;
    double entropy_epoch = ctx.entropy_sum.item<double>();
    if (ranks > 1) {  // the epoch's means over all ranks, as MetricLogger.synchronize_between_processes
      stats.loss_sum = world->allreduce_sum(stats.loss_sum) / ranks;
      entropy_epoch = world->allreduce_sum(entropy_epoch) / ranks;
    }
    gather_generator_states(world, device, state);
    if (writer) {
      save_latest_checkpoint(checkpoint, previous_checkpoint, student, teacher, optimizer, loss, state);
      prometheus.set_to_now("pcdino_train_last_checkpoint_timestamp_seconds");
    }
    prometheus.set("pcdino_train_epoch", state.epoch);
    if (watchdog) watchdog->progress("the end of epoch " + std::to_string(epoch + 1));  // after the write
    if (writer && c.train.saveckp_freq > 0 && epoch % c.train.saveckp_freq == 0) {
      save_checkpoint(model_files.epoch_checkpoint(epoch), student, teacher, optimizer, loss, state);
    }
    const double steps = static_cast<double>(std::max<std::size_t>(stats.loss_count, 1));
    report.last_epoch_loss =
        stats.loss_count > 0 ? stats.loss_sum / static_cast<double>(stats.loss_count) : 0;
    entropy_epoch /= steps;
    const double kl_epoch = report.last_epoch_loss - entropy_epoch;
    std::optional<double> knn_top1;
    if (online_knn && ((epoch + 1) % h.online_knn_every == 0 || epoch + 1 == epochs)) {
      knn_top1 = online_knn->top1(teacher->backbone, device);
      spdlog::info("epoch {}/{}: online kNN top-1 {:.2f}% ({} held-out images, k {}, T {})", epoch + 1,
                   epochs, *knn_top1, online_knn->images(), OnlineKnn::kK, OnlineKnn::kTemperature);
    }
    // train_scDINO.time_budget_minutes: estimated again at the end of every whole epoch of the start that
    // made the first estimate (that epoch's speed, its end's work), so that a run that slowed down or sped
    // up still ends on time. The planned last epoch (shorter or not) ends the run. A restart keeps the cut
    // it finds.
    if (budget_open && first_iter == 0) {
      ctx.on_window = nullptr;
      if (stats.loss_count == niter && epoch + 1 < epochs) {  // the planned last epoch ends the run
        const double end_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_started).count() -
            stats.seconds;
        const std::size_t done = static_cast<std::size_t>(epoch + 1) * niter;
        const std::size_t steps = budget.at_epoch_end(
            done, stats.window_step_seconds, stats.seconds / static_cast<double>(niter), end_seconds);
        const bool first_cut = state.args.count(kBudgetStepsArg) == 0;
        apply_cut(done, writer ? steps : 0, ("estimate after epoch " + std::to_string(epoch + 1)).c_str());
        // The checkpoint just written gets the first cut, so that a restart keeps these schedules; rewritten
        // in place, so that checkpoint.prev.pth stays the epoch before it. A later estimate goes into the
        // next epoch's: a restart from this one continues the earlier plan, which reads the same index here.
        if (writer && first_cut) save_checkpoint(checkpoint, student, teacher, optimizer, loss, state);
      }
    }
    const double images_per_second =
        static_cast<double>(stats.loss_count * global_batch) / std::max(stats.seconds, 1e-9);
    const double eta = (epochs - epoch - 1) * stats.seconds;
    PhaseSeconds phases = stats.phases;
    for (double& seconds : phases) seconds /= steps;
    if (writer) {
      append_line(model_files.training_log(),
                  format_training_log_line({epoch, report.last_epoch_loss, stats.lr, stats.wd, entropy_epoch,
                                            kl_epoch, knn_top1}));
      MetricsRecord record;
      record.kind = MetricsRecord::Kind::kEpoch, record.epoch = epoch;
      record.loss = report.last_epoch_loss, record.teacher_entropy = entropy_epoch, record.kl = kl_epoch;
      record.lr = stats.lr, record.wd = stats.wd, record.momentum = stats.momentum,
      record.online_knn_top1 = knn_top1;
      record.images_per_second = images_per_second, record.eta_seconds = eta;
      record.seconds_per_step = {phases[0], phases[1], phases[2], phases[3]};
      record.phase_clock = phase_clock.source();
      append_line(metrics_file, format_metrics_record(record));
    }
    spdlog::info(
        "epoch {}/{}: seconds per step ({}): data wait {:.3f}, forward {:.3f}, backward {:.3f}, update "
        "{:.3f}",
        epoch + 1, epochs, phase_clock.source(), phases[0], phases[1], phases[2], phases[3]);
    spdlog::info("epoch {}/{}: loss {:.4f} lr {:.3g} wd {:.3g} momentum {:.5f} {:.1f} images/s ETA {:.0f} s",
                 epoch + 1, epochs, report.last_epoch_loss, stats.lr, stats.wd, stats.momentum,
                 images_per_second, eta);
    spdlog::info("epoch {}/{}: teacher entropy {:.4f} nats (uniform: {:.4f}), teacher-student KL {:.4f}",
                 epoch + 1, epochs, entropy_epoch, std::log(static_cast<double>(h.out_dim)), kl_epoch);
  }
  report.epochs_done = state.epoch;
  report.images_per_second = static_cast<double>(ctx.iterations_this_run) *
                             static_cast<double>(global_batch) / std::max(seconds_this_run, 1e-9);
  return report;
}

}  // namespace pcdino::train
