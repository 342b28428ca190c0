#include "epoch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/train/device.hpp"

namespace pcdino::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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

// The schedules' values a step reads (main_dino.py's per-iteration lr, wd and momentum).
struct StepSchedule {
  int schedule_epoch = 0;  // the epoch the schedules' index falls in (the teacher temperature's)
  double lr = 0, wd = 0, momentum = 0, teacher_temp = 0;
};

// The schedules at global iteration `global_it` (read through the cut), set on the optimizer's groups: the
// weight decay on the first (weights), none on the second (biases and norms), as DINO's params_groups.
StepSchedule schedule_step(EpochContext& ctx, std::size_t global_it) {
  const std::size_t at = ctx.cut.index(global_it);  // global_it unless cut
  StepSchedule s;
  s.schedule_epoch = static_cast<int>(at / ctx.niter);
  s.lr = ctx.lr_schedule[at], s.wd = ctx.wd_schedule[at], s.momentum = ctx.momentum_schedule[at];
  s.teacher_temp = ctx.loss.teacher_temperature(s.schedule_epoch);
  auto& g = ctx.optimizer.param_groups();
  static_cast<torch::optim::AdamWOptions&>(g[0].options()).lr(s.lr).weight_decay(s.wd);
  static_cast<torch::optim::AdamWOptions&>(g[1].options()).lr(s.lr).weight_decay(0.0);
  return s;
}

// `crops` (on the host) onto the device and the step: one replay of --cuda-graph's graph, or eagerly with
// each phase timed. The clock was started before the batch was taken from the loader.
void run_step(EpochContext& ctx, Batch& crops, int epoch, const StepSchedule& s) {
  PhaseClock& clock = *ctx.clock;
  if (!graphed_step(ctx, epoch, crops)) {
    for (auto& t : crops) t = t.to(ctx.device, /*non_blocking=*/true);
    clock.lap(Phase::kData);
    dino_step(ctx, crops, epoch, s.schedule_epoch, s.momentum, false,
              [&clock](Phase phase) { clock.lap(phase); });
    return;
  }
  // The crops and schedules into the graph's static tensors, then the whole step in one replay.
  for (std::size_t k = 0; k < crops.size(); ++k) ctx.graph_inputs[k].copy_(crops[k], /*non_blocking=*/true);
  ctx.lr_t.fill_(s.lr), ctx.wd_t.fill_(s.wd), ctx.momentum_t.fill_(s.momentum);
  ctx.teacher_temp_t.fill_(s.teacher_temp);
  clock.lap(Phase::kData);
  const auto step = [&] {
    try {
      dino_step(ctx, ctx.graph_inputs, epoch, s.schedule_epoch, s.momentum, true, [](Phase) {});
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
}

// Whether all ranks stop after iteration `it` (a signal, stop_after_iterations). Slurm signals every task,
// not at the same instant: with several ranks they agree, and the watchdog hears of the progress.
bool agree_to_stop(EpochContext& ctx, int epoch, std::size_t it) {
  bool stop = (ctx.stop_requested && ctx.stop_requested->load()) ||
              (ctx.stop_after_iterations > 0 && ctx.iterations_this_run >= ctx.stop_after_iterations);
  if (ctx.ranks > 1) {
    const auto agreement = Clock::now();
    stop = ctx.world->allreduce_max(stop ? 1 : 0) > 0;
    ctx.comm_wait_seconds += seconds_since(agreement);
    ctx.watchdog->progress("epoch " + std::to_string(epoch + 1) + " iteration " + std::to_string(it + 1));
  }
  return stop;
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
void record_phases(EpochContext& ctx, const PhaseSeconds& before, const PhaseSeconds& after) {
  static constexpr const char* kNames[kPhaseCount] = {"data", "forward", "backward", "update"};
  monitoring::MetricsFile& m = *ctx.prometheus;
  for (std::size_t p = 0; p < kPhaseCount; ++p)
    m.add("pcdino_train_phase_seconds_total", std::max(0.0, after[p] - before[p]), kNames[p]);
  double waited = ctx.comm_wait_seconds;
  ctx.comm_wait_seconds = 0;
  if (ctx.fusion) waited += ctx.fusion->take_wait_seconds();
  m.add("pcdino_train_allreduce_wait_seconds_total", waited);
}

// The metrics window of up to 10 iterations that a reading of the device's sums ends.
struct Window {
  double entropy_start = 0;  // the epoch's entropy sum at the window's start
  std::size_t count = 0;     // its iterations so far
  std::size_t first = 0;     // its first iteration
  Clock::time_point start;
};

// A full window's means into the Prometheus gauges and, on the writer, the metrics file.
void record_window(EpochContext& ctx, Window& w, double window_loss, int epoch, std::size_t global_it,
                   const StepSchedule& s) {
  const double entropy_total = ctx.entropy_sum.item<double>();
  const double window_entropy = (entropy_total - w.entropy_start) / static_cast<double>(w.count);
  const double mean_loss = window_loss / static_cast<double>(w.count);
  w.entropy_start = entropy_total;
  ctx.prometheus->set("pcdino_train_loss", mean_loss);
  ctx.prometheus->set("pcdino_train_teacher_entropy", window_entropy);
  ctx.prometheus->set("pcdino_train_kl_divergence", mean_loss - window_entropy);
  if (!ctx.writer) return;
  MetricsRecord record;
  record.kind = MetricsRecord::Kind::kIteration, record.epoch = epoch;
  record.iteration = static_cast<long>(global_it) + 1;
  record.loss = mean_loss, record.teacher_entropy = window_entropy, record.kl = mean_loss - window_entropy;
  record.lr = s.lr, record.wd = s.wd, record.momentum = s.momentum;
  append_line(ctx.metrics_file, format_metrics_record(record));
}

// Reads the window that iteration `it` ends (every 10th, the epoch's last, a stop): the loss, checked to
// be finite, the phases, and for a full window its records and its seconds per step (ctx.on_window).
void read_window(EpochContext& ctx, EpochStats& stats, Window& w, int epoch, std::size_t it,
                 const StepSchedule& s, bool stop) {
  const std::size_t global_it = static_cast<std::size_t>(epoch) * ctx.niter + it;
  const double window_loss = ctx.window_loss_sum.item<double>();
  const PhaseSeconds phases_before = stats.phases;
  ctx.clock->collect(stats.phases);
  record_phases(ctx, phases_before, stats.phases);
  if (!std::isfinite(window_loss)) {
    throw DataError("loss is " + std::to_string(window_loss) + " in epoch " + std::to_string(epoch) +
                    " iterations " + std::to_string(w.first) + "-" + std::to_string(it) +
                    ": stopping training (lower lr or use clip_grad)");
  }
  ctx.window_loss_sum.zero_();
  stats.loss_sum += window_loss;
  // A stop's part-window is read (the non-finite check) but not recorded.
  const bool full_window = (it + 1) % 10 == 0 || it + 1 == epoch_iterations(ctx, epoch);
  if (full_window && (ctx.writer || ctx.prometheus->enabled()))
    record_window(ctx, w, window_loss, epoch, global_it, s);
  // The window's wall time per step: read after the loss, so a device's queued work is in it.
  const auto now = Clock::now();
  if (full_window && !stop) {
    stats.window_step_seconds.push_back(std::chrono::duration<double>(now - w.start).count() /
                                        static_cast<double>(w.count));
    if (ctx.on_window) ctx.on_window(global_it + 1, stats.window_step_seconds);
  }
  w.start = now;
  w.count = 0;
  w.first = it + 1;
}

// The writer's progress line every 10 iterations within an epoch: the mean loss so far, images/s, ETA.
void log_progress(const EpochContext& ctx, const EpochStats& stats, int epoch, std::size_t it,
                  std::size_t first_iter, Clock::time_point epoch_start) {
  const std::size_t global_it = static_cast<std::size_t>(epoch) * ctx.niter + it;
  const double per_step = seconds_since(epoch_start) / static_cast<double>(it + 1 - first_iter);
  const double remaining = static_cast<double>(ctx.cut.steps - global_it - 1);
  spdlog::info("epoch {}/{} iteration {}/{}: loss {:.4f} {:.1f} images/s ETA {:.0f} s", epoch + 1, ctx.epochs,
               it + 1, epoch_iterations(ctx, epoch), stats.loss_sum / static_cast<double>(stats.loss_count),
               static_cast<double>(ctx.global_batch) / per_step, remaining * per_step);
}

}  // namespace

std::size_t epoch_iterations(const EpochContext& ctx, int epoch) {
  const std::size_t first = static_cast<std::size_t>(epoch) * ctx.niter;
  return ctx.cut.steps <= first ? 0 : std::min(ctx.niter, ctx.cut.steps - first);
}

EpochStats train_one_epoch(EpochContext& ctx, Prefetcher<Batch>& loader, int epoch, std::size_t first_iter) {
  EpochStats stats;
  ctx.entropy_sum.zero_(), ctx.window_loss_sum.zero_();
  const auto epoch_start = Clock::now();
  Window window;
  window.first = first_iter, window.start = epoch_start;
  // The bound is read again after each step: the time budget's first estimate may end this epoch early.
  for (std::size_t it = first_iter; it < epoch_iterations(ctx, epoch); ++it) {
    const StepSchedule s = schedule_step(ctx, static_cast<std::size_t>(epoch) * ctx.niter + it);
    stats.lr = s.lr, stats.wd = s.wd, stats.momentum = s.momentum;
    const auto step_start = Clock::now();
    ctx.clock->start();
    Batch crops = *loader.next();
    run_step(ctx, crops, epoch, s);
    ++stats.loss_count;
    ++ctx.iterations_this_run;
    ++window.count;
    const bool stop = agree_to_stop(ctx, epoch, it);
    record_step(ctx, crops.front().size(0), s.lr, seconds_since(step_start));
    // One reading every 10 iterations (DINO's MetricLogger print_freq), at the epoch's end and on a stop.
    if ((it + 1) % 10 == 0 || it + 1 == epoch_iterations(ctx, epoch) || stop)
      read_window(ctx, stats, window, epoch, it, s, stop);
    if (ctx.writer && (it + 1) % 10 == 0 && it + 1 < epoch_iterations(ctx, epoch))
      log_progress(ctx, stats, epoch, it, first_iter, epoch_start);
    if (stop) {
      stats.stopped_after = it + 1;
      return stats;
    }
  }
  stats.seconds = seconds_since(epoch_start);
  return stats;
}

void append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw CantCreateError("cannot append to '" + path + "': " + std::strerror(errno));
  out << line << "\n";
  out.flush();
  // A full filesystem fails the write itself: the line must not be lost without a word.
  if (!out) throw CantCreateError("cannot append to '" + path + "': " + std::strerror(errno));
}

}  // namespace pcdino::train
