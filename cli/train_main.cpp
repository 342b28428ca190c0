// pcdino-train: the training stage as its own program, because LibTorch is loaded only by the programs that
// need it (~0.5 s and ~1 GiB per process); `pcdino train` runs it. Parses options, calls run_training().
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>

#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/process.hpp"
#include "pcdino/train/trainer.hpp"

int main(int argc, char** argv) {
  pcdino::train::tune_process(argv);
  using pcdino::ExitCode;
  using pcdino::to_int;
  CLI::App app{"pcdino train: DINO pretraining of a ViT (single process; see `pcdino train --help`)",
               "pcdino train"};
  pcdino::app::ConfigOptions config;
  pcdino::train::TrainRuntime rt;
  bool no_resume = false;
  pcdino::app::add_config_options(&app, config);
  app.add_option("--threads", rt.threads,
                 "LibTorch intra-op threads, also the most OpenBLAS threads (0: LibTorch's default)")
      ->capture_default_str();
  app.add_option("--loader-threads", rt.loader_threads,
                 "Decoding and augmentation threads (0: train_scDINO.num_workers, at least 1)")
      ->capture_default_str();
  app.add_option("--limit-images", rt.limit_images,
                 "Train on the first N images of the training split (0: all)")
      ->capture_default_str();
  app.add_option("--model-dir", rt.output_dir,
                 "Output folder (default {run_dir}/scDINO_ViTs/{dino_vit_name})");
  app.add_option("--device", rt.device, "auto (a GPU if LibTorch sees one), cpu, cuda or cuda:N")
      ->capture_default_str();
  app.add_option(
         "--amp-dtype", rt.amp_dtype,
         "Autocast type when use_fp16 is true: auto (on a GPU bfloat16 from compute capability 8.0, "
         "else float16 with loss scaling; on a CPU whichever of bfloat16 and float32 a timed step at the "
         "start finds faster; kept on a restart), float32 (no autocast), bfloat16, "
         "float16 (GPUs only)")
      ->capture_default_str();
  app.add_option("--fusion-threshold-mb", rt.fusion_threshold_mb,
                 "Gradient fusion buffer size in MiB with several ranks (Horovod's default 128)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--comm-timeout", rt.comm_timeout_seconds,
                 "With several ranks: seconds without progress (a dead or hung peer) before this rank ends "
                 "with exit code 74 so that the job ends (0: wait forever)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stop-after-iterations", rt.stop_after_iterations,
                 "Checkpoint and stop (exit 75, as on SIGTERM) after this many iterations of this run; 0: "
                 "train to the end")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-resume", no_resume, "Start from scratch even if checkpoint.pth exists");
  app.add_flag("--synthetic-crops", rt.synthetic_crops,
               "Benchmarks: train every step on the same random crops made once on the device (no loading or "
               "augmentation in the step; the model learns nothing)");
  app.add_flag(
      "--cuda-graph", rt.cuda_graph,
      "Capture the training step once as a CUDA graph after 3 eager steps and replay it for the rest of "
      "the run (CUDA device, float32 or bfloat16, NCCL >= 2.9.6 with several ranks; from the epoch "
      "the last layer trains)");
  app.add_flag(
      "--profile-kernels", rt.profile_kernels,
      "Benchmarks: time the GPU's kernels over the run's last epoch (the PyTorch profiler, CUPTI) and "
      "write their time per step, the step's kernel-time floor, to metrics.jsonl "
      "(kernel_seconds_per_step); CUDA device only; that epoch's images/s include the profiler's cost");
  return pcdino::app::run_command_line(app, argc, argv, [&] {
    rt.resume = !no_resume;
    pcdino::train::TrainReport report;
    pcdino::app::run_mpi_stage(
        config, [&](const pcdino::PipelineConfig& pipeline, const pcdino::MpiWorld& world) {
          const char* node = std::getenv("SLURMD_NODENAME");  // Slurm's node name (several per host in tests)
          spdlog::info("rank {} of {} on {} (local rank {} of {})", world.rank(), world.size(),
                       node != nullptr ? node : world.host(), world.local_rank(), world.local_size());
          pcdino::train::install_stop_signal_handlers();
          report = pcdino::train::run_training(pipeline, rt, &world);
        });
    if (report.interrupted) return to_int(ExitCode::kTempFail);  // Slurm requeues; the next run resumes
    spdlog::info("trained {} epochs: last loss {:.4f}, {:.1f} images/s; model in {}", report.epochs_done,
                 report.last_epoch_loss, report.images_per_second, report.output_dir);
    return to_int(ExitCode::kOk);
  });
}
