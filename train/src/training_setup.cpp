// The set-up of a run of train_scDINO (training.hpp), in the order main_dino.py's train_dino does it: the
// threads and device, the data, the student and teacher, the run folder, a checkpoint to resume, the
// precision, data parallelism, the online kNN, what every epoch works with, the time budget.
#include "training.hpp"

namespace pcdino::train::detail {

namespace {

// How long ranks asked to stop wait for the others to agree before they take a peer for lost (Watchdog):
// longer than rank 0's work at an epoch's end (checkpoint, online kNN) that the others wait for, and half
// of the 120 s that a time limit's SIGUSR1 comes early by default (slurm.signal_seconds).
constexpr double kStopAgreementSeconds = 60;

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

}  // namespace

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

}  // namespace pcdino::train::detail
