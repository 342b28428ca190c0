#include "pcdino/train/trainer.hpp"

#include "training.hpp"

namespace pcdino::train {

namespace detail {

std::atomic<bool> stop_requested{false};

namespace {

extern "C" void on_stop_signal(int) {
  stop_requested.store(true);
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

}  // namespace

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
    auto rank_share = [&](std::size_t step) {  // this rank's images of `step` of the epoch
      std::vector<std::size_t> indices;
      for (std::size_t b = 0; b < batch; ++b)
        indices.push_back(train_[perm[(step * batch + b) * static_cast<std::size_t>(ranks_) +
                                      static_cast<std::size_t>(rank_)]]);
      return indices;
    };
    // meta.skip_corrupt: an unreadable image's place goes to one of the rank's next step (the training
    // split's, never a held-out image).
    std::optional<CorruptImages> corrupt;
    if (c_.meta.skip_corrupt) corrupt = CorruptImages{rank_share((it + 1) % niter_)};
    const auto started = Clock::now();
    Batch made = make_batch(*ds_, rank_share(it), transform_, crops_, c_.meta.seed, epoch, device_.is_cuda(),
                            batch_pool_.get(), corrupt ? &*corrupt : nullptr);
    loader_time_->add(seconds_since(started));
    if (corrupt) loader_time_->replaced += corrupt->skipped;
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
  report_.corrupt_images_replaced = loader_time_->replaced;
  report_.images_per_second = static_cast<double>(ctx_->iterations_this_run) *
                              static_cast<double>(global_batch_) / std::max(seconds_this_run_, 1e-9);
  return report_;
}

}  // namespace detail

void install_stop_signal_handlers() {
  std::signal(SIGTERM, detail::on_stop_signal);
  std::signal(SIGUSR1, detail::on_stop_signal);
}

TrainReport run_training(const PipelineConfig& c, const TrainRuntime& rt, const MpiWorld* world) {
  return detail::Training(c, rt, world).run();
}

}  // namespace pcdino::train
