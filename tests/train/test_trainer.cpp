// The training loop on a tiny synthetic dataset: it trains, writes the reference's files, and a run
// stopped mid-epoch (as on SIGTERM) and resumed ends with exactly the weights of an uninterrupted run.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../lib/synthetic.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/trainer.hpp"

namespace pcdino::train {
namespace {

PipelineConfig tiny_config(const test::TempDir& d) {
  PipelineConfig c = parse_config(R"(
meta:
  name_of_run: run
  seed: 7
  train_datasetsplit_fraction: 1.0
train_scDINO:
  epochs: 2
  batch_size_per_gpu: 4
  saveckp_freq: 1
  hyperparameters:
    arch: vit_tiny
    patch_size: 4
    out_dim: 32
    global_crops_size: 12
    local_crops_size: 8
    local_crops_number: 2
    warmup_epochs: 1
    freeze_last_layer: 1
    drop_path_rate: 0.1
)",
                                  "tiny.yaml");
  c.meta.dataset_dir = d / "data";
  c.meta.output_dir = d / "out";
  return c;
}

// tiny_config() with its dataset (2 classes of 6 12-px images) and mean/std file written in `d`.
PipelineConfig tiny_run(const test::TempDir& d) {
  test::write_synthetic_dataset(d / "data", 2, 6, 12, PixelType::kUint8, {{false, 20}}, 5);
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.3}, {0.45}}));
  return tiny_config(d);
}

// One thread, the model written to `dir`.
// One LibTorch thread, and use_fp16's precision fixed: by the CPU's bfloat16 unit on a CPU (timing each
// precision, --amp-dtype auto's way, could choose differently in two runs these tests compare).
TrainRuntime one_thread(const std::string& dir) {
  TrainRuntime rt;
  rt.threads = 1;
  rt.output_dir = dir;
  if (!torch::cuda::is_available()) rt.amp_dtype = cpu_bfloat16_unit() != nullptr ? "bfloat16" : "float32";
  return rt;
}

std::map<std::string, torch::Tensor> teacher_of(const std::string& dir) {
  return read_state_dict(dir + "/checkpoint.pth", "teacher");
}

TEST(Trainer, InterruptedAndResumedEqualsUninterrupted) {
  test::TempDir d;
  const PipelineConfig c = tiny_run(d);

  TrainRuntime whole = one_thread(d / "whole");
  const TrainReport a = run_training(c, whole);
  EXPECT_EQ(a.epochs_done, 2);
  EXPECT_FALSE(a.interrupted);
  EXPECT_TRUE(std::isfinite(a.last_epoch_loss));

  TrainRuntime part = whole;
  part.output_dir = d / "parts";
  part.stop_after_iterations = 4;  // 3 iterations per epoch: stops in the middle of epoch 2
  const TrainReport b1 = run_training(c, part);
  EXPECT_TRUE(b1.interrupted);
  EXPECT_EQ(b1.epochs_done, 1);
  part.stop_after_iterations = 0;
  const TrainReport b2 = run_training(c, part);
  EXPECT_FALSE(b2.interrupted);
  EXPECT_EQ(b2.epochs_done, 2);

  const auto ta = teacher_of(whole.output_dir), tb = teacher_of(part.output_dir);
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, value] : ta) EXPECT_TRUE(torch::equal(value, tb.at(name))) << name;
  const auto sa = read_state_dict(whole.output_dir + "/checkpoint.pth", "student");
  const auto sb = read_state_dict(part.output_dir + "/checkpoint.pth", "student");
  for (const auto& [name, value] : sa) EXPECT_TRUE(torch::equal(value, sb.at(name))) << name;

  // The reference's files: log.txt with one JSON line per epoch, checkpoint{epoch:04}.pth.
  std::ifstream log(whole.output_dir + "/log.txt");
  std::string line;
  int lines = 0;
  while (std::getline(log, line)) {
    EXPECT_NE(line.find("\"train_loss\""), std::string::npos) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  EXPECT_TRUE(std::filesystem::exists(whole.output_dir + "/checkpoint0000.pth"));
  EXPECT_TRUE(std::filesystem::exists(whole.output_dir + "/checkpoint0001.pth"));
  // Training moved the weights away from the initial teacher (which equalled the student).
  EXPECT_FALSE(torch::equal(ta.at("cls_token"), sa.at("cls_token")));
  // Each epoch's record says what a batch cost the loader (advise_loader's figure).
  int epochs = 0;
  for (const auto& r : read_metrics(whole.output_dir + "/metrics.jsonl")) {
    if (r.kind != MetricsRecord::Kind::kEpoch) continue;
    ++epochs;
    ASSERT_TRUE(r.loader_seconds_per_batch.has_value()) << "epoch " << r.epoch;
    EXPECT_GT(*r.loader_seconds_per_batch, 0);
    EXPECT_LT(*r.loader_seconds_per_batch, 60);
  }
  EXPECT_EQ(epochs, 2);
}

// train_scDINO.time_budget_minutes: a budget the first epoch already used up ends the run there, the
// count is kept in the checkpoint, and a restart with a larger budget keeps it (its schedules were cut for
// it); a budget every step fits changes nothing.
TEST(Trainer, ATimeBudgetCutsTheStepsOnceAndARestartKeepsTheCut) {
  test::TempDir d;
  PipelineConfig c = tiny_run(d);  // 12 images, batch 4: 3 steps an epoch, too few for a first estimate
  c.train.epochs = 4;
  c.train.time_budget_minutes = 1e-6;
  TrainRuntime rt = one_thread(d / "cut");
  EXPECT_EQ(run_training(c, rt).epochs_done, 1) << "decided at the end of the first epoch: it ends there";
  const auto args = read_checkpoint_state(ModelFiles{rt.output_dir}.checkpoint()).args;
  EXPECT_EQ(args.at("steps_by_time_budget"), "3");
  EXPECT_EQ(args.at("schedule_cut"), "3 3");
  EXPECT_EQ(args.at("epochs_by_time_budget"), "1");
  EXPECT_EQ(args.at("epochs"), "1");
  EXPECT_FALSE(std::filesystem::exists(ModelFiles{rt.output_dir}.previous_checkpoint()))
      << "the count goes into epoch 1's checkpoint, which has no epoch before it";

  c.train.time_budget_minutes = 1000;
  EXPECT_EQ(run_training(c, rt).epochs_done, 1) << "the cut holds on a restart";
  EXPECT_EQ(read_checkpoint_state(ModelFiles{rt.output_dir}.checkpoint()).args.at("steps_by_time_budget"),
            "3");

  TrainRuntime roomy = one_thread(d / "roomy");
  EXPECT_EQ(run_training(c, roomy).epochs_done, 4);
  const auto roomy_args = read_checkpoint_state(ModelFiles{roomy.output_dir}.checkpoint()).args;
  EXPECT_EQ(roomy_args.at("steps_by_time_budget"), "12");
  EXPECT_EQ(roomy_args.at("epochs_by_time_budget"), "4");
}

// With 50 steps an epoch the first estimate comes inside the first epoch, at the end of its fourth 10-step
// window (the first left out, the next three measured): a budget already spent ends the run there, a
// shorter last epoch, and a restart keeps that cut.
TEST(Trainer, TheFirstEstimateComesAfterAMeasuredStretchAndMayEndAnEpochEarly) {
  test::TempDir d;
  test::write_synthetic_dataset(d / "data", 2, 100, 12, PixelType::kUint8, {{false, 20}}, 5);
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.3}, {0.45}}));
  PipelineConfig c = tiny_config(d);
  c.train.epochs = 3;
  c.train.hyperparameters.freeze_last_layer = 0;
  c.train.time_budget_minutes = 1e-6;
  TrainRuntime rt = one_thread(d / "cut");
  const TrainReport report = run_training(c, rt);
  EXPECT_EQ(report.epochs_done, 1);
  const auto state = read_checkpoint_state(ModelFiles{rt.output_dir}.checkpoint());
  EXPECT_EQ(state.args.at("steps_by_time_budget"), "40");
  EXPECT_EQ(state.args.at("epochs"), "1");
  EXPECT_EQ(state.epoch, 1);
  EXPECT_EQ(state.iteration, 0);
  std::ifstream metrics(ModelFiles{rt.output_dir}.metrics());
  std::string line, last_iteration;
  while (std::getline(metrics, line))
    if (line.find("\"record\":\"iteration\"") != std::string::npos) last_iteration = line;
  EXPECT_NE(last_iteration.find("\"iteration\":40"), std::string::npos) << last_iteration;

  c.train.time_budget_minutes = 1000;
  EXPECT_EQ(run_training(c, rt).epochs_done, 1) << "the cut holds on a restart";
}

// checkpoint.pth keeps the one before it as checkpoint.prev.pth; a torn checkpoint.pth (a write cut short
// on a filesystem without atomic rename, a disk error) is refused on resume with the reason and the run
// resumes from the one before it, ending with the uninterrupted run's weights.
TEST(Trainer, ATornCheckpointFallsBackToTheOneBeforeIt) {
  test::TempDir d;
  const PipelineConfig c = tiny_run(d);
  TrainRuntime whole = one_thread(d / "whole");
  run_training(c, whole);

  TrainRuntime part = whole;
  part.output_dir = d / "parts";
  part.stop_after_iterations = 4;  // the end of epoch 1 (checkpoint.prev.pth), then 1 iteration of epoch 2
  ASSERT_TRUE(run_training(c, part).interrupted);
  const ModelFiles files{part.output_dir};
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).iteration, 1);
  EXPECT_EQ(read_checkpoint_state(files.previous_checkpoint()).epoch, 1);
  EXPECT_EQ(read_checkpoint_state(files.previous_checkpoint()).iteration, 0);
  std::filesystem::resize_file(files.checkpoint(), std::filesystem::file_size(files.checkpoint()) / 2);
  EXPECT_THROW(read_checkpoint_state(files.checkpoint()), Error);

  part.stop_after_iterations = 0;
  EXPECT_EQ(run_training(c, part).epochs_done, 2);
  const auto ta = teacher_of(whole.output_dir), tb = teacher_of(part.output_dir);
  for (const auto& [name, value] : ta) EXPECT_TRUE(torch::equal(value, tb.at(name))) << name;
}

// A training image that cannot be read stops the training with a DataError naming it (exit 65), the last
// checkpoint kept to resume from; with meta.skip_corrupt the run goes on, another training image in its
// place in every batch that draws it (issue #73).
TEST(Trainer, AnUnreadableImageStopsTheRunNamingItUnlessSkipCorruptReplacesIt) {
  test::TempDir d;
  PipelineConfig c = tiny_run(d);
  c.train.epochs = 1;
  TrainRuntime rt = one_thread(d / "model");
  ASSERT_EQ(run_training(c, rt).epochs_done, 1);
  const std::string bad = d / "data/class1/img3.tif";
  write_file_atomic(bad, "II* this is no TIFF any more");

  c.train.epochs = 2;
  try {
    run_training(c, rt);
    FAIL() << "an unreadable image was trained on";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  const ModelFiles files{rt.output_dir};
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).epoch, 1) << "the last checkpoint is kept";

  c.meta.skip_corrupt = true;
  const TrainReport r = run_training(c, rt);
  EXPECT_EQ(r.epochs_done, 2);
  EXPECT_EQ(r.corrupt_images_replaced, 1u) << "the bad image is drawn once in an epoch";
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).epoch, 2);
}

// A checkpoint of another run (another seed, another architecture) in the model folder is not resumed from:
// refused with the reason, and with nothing of this run's to fall back to, the training stops.
TEST(Trainer, AnotherRunsCheckpointIsRefusedWithTheReason) {
  test::TempDir d;
  PipelineConfig c = tiny_run(d);
  TrainRuntime rt = one_thread(d / "model");
  rt.stop_after_iterations = 2;
  run_training(c, rt);
  c.meta.seed = 8;
  try {
    run_training(c, rt);
    ADD_FAILURE() << "resumed from another run's checkpoint";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("another run's checkpoint (seed 7, this run's 8)"),
              std::string::npos)
        << e.what();
  }
}

// A process killed after keeping checkpoint.prev.pth and before writing the new checkpoint.pth leaves both
// names on one file; the next run's saves keep going and leave no temporary link behind (found on the
// local cluster, where the second save of such a run failed with "File exists"); nor do the temporary
// checkpoint files of a killed writer, which the next start removes (168 MB each, filling CI's disk).
TEST(Trainer, AWriteCutShortAfterKeepingThePreviousCheckpointIsNoObstacle) {
  test::TempDir d;
  const PipelineConfig c = tiny_run(d);
  TrainRuntime rt = one_thread(d / "model");
  rt.stop_after_iterations = 2;
  run_training(c, rt);
  const ModelFiles files{rt.output_dir};
  std::filesystem::create_hard_link(files.checkpoint(), files.previous_checkpoint());
  // And a writer killed mid-write (its node lost) left its temporary file, which the next start removes.
  const std::string cut_short = temporary_name(files.checkpoint()) + "1";
  write_file_atomic(cut_short, "torn");
  const std::string users = (std::filesystem::path(rt.output_dir) / "notes.tmp.1.2").string();
  write_file_atomic(users, "not a checkpoint's");
  run_training(c, rt);  // two saves: the end of epoch 1, then the stop in epoch 2
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).iteration, 1);
  EXPECT_EQ(read_checkpoint_state(files.previous_checkpoint()).epoch, 1);
  EXPECT_FALSE(std::filesystem::exists(cut_short));
  EXPECT_TRUE(std::filesystem::exists(users));
  std::filesystem::remove(users);
  for (const auto& entry : std::filesystem::directory_iterator(rt.output_dir))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
}

// A process of an earlier start of a Slurm job (stopped with its node, resumed after the requeue) does not
// replace the checkpoint a later start wrote: checkpoints are tagged with the job, its restart count and
// the writer.
TEST(Trainer, AStaleStartDoesNotReplaceALaterStartsCheckpoint) {
  test::TempDir d;
  const PipelineConfig c = tiny_run(d);
  TrainRuntime rt = one_thread(d / "model");
  rt.stop_after_iterations = 2;
  const ModelFiles files{rt.output_dir};
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_RESTART_COUNT", "1", 1);  // the second start writes first
  run_training(c, rt);
  const auto later = read_checkpoint_state(files.checkpoint());
  EXPECT_EQ(later.args.at("slurm_job_id"), "4242");
  EXPECT_EQ(later.args.at("slurm_restart_count"), "1");
  EXPECT_NE(later.args.at("writer").find(" pid "), std::string::npos);
  ::setenv("SLURM_RESTART_COUNT", "0", 1);  // then a process of the first start
  try {
    run_training(c, rt);
    ADD_FAILURE() << "a stale start replaced the checkpoint";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("is stale"), std::string::npos) << e.what();
  }
  ::setenv("SLURM_RESTART_COUNT", "2", 1);  // a later start replaces it
  run_training(c, rt);
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).args.at("slurm_restart_count"), "2");
  // It resumed from the second start's checkpoint (epoch 0, iteration 2 of 3) and did two iterations.
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).epoch, 1);
  EXPECT_EQ(read_checkpoint_state(files.checkpoint()).iteration, 1);
}

// --cuda-graph's step (static crops, lr, weight decay, momentum and teacher temperature read from device
// scalars, AdamW's step counts on the device, the epoch's sums made once) run without capture, beside the
// ordinary step, on `device`: both train 3 epochs from the same seed. The last layer is frozen in epoch 1,
// so epochs 2 and 3 take that step, at two teacher temperatures of the warm-up (one graph serves both: a
// temperature taken from the host would stay at epoch 2's). Returns the two output folders.
std::pair<std::string, std::string> train_ordinary_and_graph_step(const test::TempDir& d,
                                                                  const std::string& device) {
  test::write_synthetic_dataset(d / "data", 2, 6, 12, PixelType::kUint8, {{false, 20}}, 5);
  PipelineConfig c = tiny_config(d);
  c.train.epochs = 3;
  c.train.hyperparameters.warmup_teacher_temp = 0.02;
  c.train.hyperparameters.teacher_temp = 0.07;
  c.train.hyperparameters.warmup_teacher_temp_epochs = 3;
  // float32: the two updates round differently (list ops against the CPU's one-pass loop, ~1e-7 a step),
  // which bfloat16 autocast (use_fp16 on a CPU with AMX) would magnify beyond the tolerance.
  c.train.hyperparameters.use_fp16 = false;
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.3}, {0.45}}));
  TrainRuntime ordinary = one_thread(d / "ordinary");
  ordinary.device = device;
  TrainRuntime graph_step = ordinary;
  graph_step.output_dir = d / "graph_step";
  graph_step.graph_step_without_graph = true;
  const TrainReport a = run_training(c, ordinary), b = run_training(c, graph_step);
  EXPECT_NEAR(a.last_epoch_loss, b.last_epoch_loss, 1e-5);
  // Not a comparison of two untrained last layers: it trained in epoch 2, through that step.
  const auto first = read_state_dict(graph_step.output_dir + "/checkpoint0000.pth", "student");
  const auto last = read_state_dict(graph_step.output_dir + "/checkpoint.pth", "student");
  EXPECT_FALSE(torch::equal(first.at("head.last_layer.weight_v"), last.at("head.last_layer.weight_v")));
  return {ordinary.output_dir, graph_step.output_dir};
}

// On the CPU the two steps agree to float32 rounding, weight by weight: at most 8.3e-8 apart with Debian's
// LibTorch 1.13, 1.9e-7 with the PyTorch 2.11 wheel's CPU kernels (H200 machine, bench/RESULTS.md).
TEST(Trainer, TheGraphsStepTrainsAsTheOrdinaryStep) {
  test::TempDir d;
  const auto [ordinary, graph_step] = train_ordinary_and_graph_step(d, "cpu");
  for (const char* model : {"teacher", "student"}) {
    const auto wa = read_state_dict(ordinary + "/checkpoint.pth", model);
    const auto wb = read_state_dict(graph_step + "/checkpoint.pth", model);
    ASSERT_EQ(wa.size(), wb.size());
    double max_abs = 0;
    for (const auto& [name, value] : wa) {
      max_abs = std::max(max_abs, (value - wb.at(name)).abs().max().item<double>());
      EXPECT_TRUE(torch::allclose(value, wb.at(name), 1e-5, 1e-6)) << model << " " << name;
    }
    std::printf("%s: largest weight difference %.3e\n", model, max_abs);
  }
}

// On a GPU the backward's atomic adds (the position embedding's interpolation among them) make each run
// round differently, so weights are not compared one by one: what the two runs changed over epochs 2 and 3
// (each checkpoint minus the ordinary run's after epoch 1) must agree to 1% in norm over all of a model's
// parameters. A step that kept a value of an earlier epoch (the teacher temperature rises from 0.02 to 0.07
// over these epochs) or missed the last layer's unfreezing changes that update by far more than 1%. Measured
// on an H200 (PyTorch 2.11 wheel): 1.3e-4 (student) and 5.2e-4 (teacher, whose update is 100x smaller); on
// this CPU path 1.4e-5 and 8.2e-4.
TEST(Trainer, TheGraphsStepTrainsAsTheOrdinaryStepOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  test::TempDir d;
  const auto [ordinary, graph_step] = train_ordinary_and_graph_step(d, "cuda");
  for (const char* model : {"teacher", "student"}) {
    const auto start = read_state_dict(ordinary + "/checkpoint0000.pth", model);
    const auto wa = read_state_dict(ordinary + "/checkpoint.pth", model);
    const auto wb = read_state_dict(graph_step + "/checkpoint.pth", model);
    double update = 0, apart = 0, max_abs = 0;
    for (const auto& [name, value] : wa) {
      const auto ua = (value - start.at(name)).to(torch::kFloat64);
      const auto ub = (wb.at(name) - start.at(name)).to(torch::kFloat64);
      update += ua.pow(2).sum().item<double>();
      apart += (ua - ub).pow(2).sum().item<double>();
      max_abs = std::max(max_abs, (value - wb.at(name)).abs().max().item<double>());
    }
    const double relative = std::sqrt(apart / update);
    std::printf(
        "%s: epochs 2-3 update norm %.3e, the two runs' updates apart by %.3e of it, largest weight "
        "difference %.3e\n",
        model, std::sqrt(update), relative, max_abs);
    EXPECT_GT(update, 0) << model << " did not train";
    EXPECT_LT(relative, 1e-2) << model;
  }
}

// --profile-kernels times a GPU's kernels: on a CPU it is refused before anything is written, naming the
// option and the device.
TEST(Trainer, ProfileKernelsIsRefusedOffAGpu) {
  test::TempDir d;
  TrainRuntime rt = one_thread(d / "model");
  rt.device = "cpu", rt.profile_kernels = true;
  try {
    run_training(tiny_run(d), rt);
    FAIL() << "--profile-kernels trained on the CPU";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--profile-kernels: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("trains on cpu"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(d / "model/checkpoint.pth"));
}

// On a GPU the last epoch's record carries its kernels' time per step; the kernels of a step cannot take
// longer than the step does on the device (its phases, timed by CUDA events, include the GPU's idle gaps).
TEST(Trainer, ProfileKernelsRecordsTheLastEpochsKernelFloorOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  test::TempDir d;
  TrainRuntime rt = one_thread(d / "model");
  rt.device = "cuda", rt.profile_kernels = true;
  run_training(tiny_run(d), rt);
  std::vector<MetricsRecord> epochs;
  for (const auto& r : read_metrics(d / "model/metrics.jsonl"))
    if (r.kind == MetricsRecord::Kind::kEpoch) epochs.push_back(r);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_FALSE(epochs[0].kernel_seconds_per_step.has_value()) << "only the last epoch is profiled";
  ASSERT_TRUE(epochs[1].kernel_seconds_per_step.has_value()) << "no kernel recorded (CUPTI?)";
  const auto& p = epochs[1].seconds_per_step;
  const double step = p.data_wait + p.forward + p.backward + p.update;
  std::printf("kernel time per step %.3e s, the step on the device %.3e s\n",
              *epochs[1].kernel_seconds_per_step, step);
  EXPECT_GT(*epochs[1].kernel_seconds_per_step, 0);
  EXPECT_LE(*epochs[1].kernel_seconds_per_step, step * 1.05);
}

// use_fp16 on a CPU with --amp-dtype auto: each precision is timed at the start, both rates go to the log
// and the report, the faster trains; the choice goes into the checkpoint and a restart keeps it untimed.
TEST(Trainer, OnTheCpuUseFp16TakesTheFasterPrecisionAndARestartKeepsIt) {
  test::TempDir d;
  const PipelineConfig c = tiny_run(d);
  ASSERT_TRUE(c.train.hyperparameters.use_fp16) << "the reference's default";
  TrainRuntime rt = one_thread(d / "timed");
  rt.device = "cpu", rt.amp_dtype = "auto";
  rt.stop_after_iterations = 4;
  const TrainReport first = run_training(c, rt);
  ASSERT_TRUE(first.interrupted);
  EXPECT_GT(first.cpu_float32_images_per_second, 0);
  EXPECT_GT(first.cpu_bfloat16_images_per_second, 0);
  EXPECT_EQ(first.cpu_precision, first.cpu_bfloat16_images_per_second > first.cpu_float32_images_per_second
                                     ? "bfloat16"
                                     : "float32");
  EXPECT_EQ(read_checkpoint_state(ModelFiles{rt.output_dir}.checkpoint()).args.at("cpu_precision"),
            first.cpu_precision);
  rt.stop_after_iterations = 0;
  const TrainReport resumed = run_training(c, rt);
  EXPECT_EQ(resumed.cpu_precision, first.cpu_precision);
  EXPECT_EQ(resumed.cpu_float32_images_per_second, 0) << "not timed again";
  if (cpu_bfloat16_unit() == nullptr) {
    // bfloat16 without a unit for it is emulated: slower here, so float32 trains.
    EXPECT_EQ(first.cpu_precision, "float32");
  }
}

TEST(Trainer, BfloatAutocastOnTheCpuTrainsAndActs) {
  test::TempDir d;
  PipelineConfig c = tiny_run(d);
  TrainRuntime bf16 = one_thread(d / "bf16");
  bf16.device = "cpu";  // also where a GPU is present: the CPU's autocast is the subject
  bf16.amp_dtype = "bfloat16";
  const TrainReport a = run_training(c, bf16);
  EXPECT_TRUE(std::isfinite(a.last_epoch_loss));
  for (const auto& [name, value] : read_state_dict(bf16.output_dir + "/checkpoint.pth", "student")) {
    EXPECT_EQ(value.scalar_type(), torch::kFloat32) << name;
  }
  c.train.hyperparameters.use_fp16 = false;
  TrainRuntime fp32 = bf16;
  fp32.output_dir = d / "fp32";
  const TrainReport b = run_training(c, fp32);
  EXPECT_GT(std::abs(a.last_epoch_loss - b.last_epoch_loss), 1e-6) << "autocast changed nothing";
  EXPECT_LT(std::abs(a.last_epoch_loss - b.last_epoch_loss), 0.1 * std::abs(b.last_epoch_loss));
  c.train.hyperparameters.use_fp16 = true;
  TrainRuntime half = bf16;
  half.amp_dtype = "float16";
  EXPECT_THROW(run_training(c, half), ConfigError) << "CPU autocast is bfloat16 only";
}

}  // namespace
}  // namespace pcdino::train
