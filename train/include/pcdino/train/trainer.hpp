// `pcdino train`: DINO pretraining (issue #4), data-parallel over MPI ranks (issue #5).
// Follows main_dino.py's train_dino / train_one_epoch: multi-crop batches, student on all crops, teacher
// (EMA of the student) on the 2 global crops, DINO loss, AdamW with per-iteration cosine schedules of
// learning rate, weight decay (not on biases and norms) and teacher momentum, per-parameter gradient
// clipping, the last layer frozen for the first freeze_last_layer epochs.
#pragma once

#include <string>

#include "pcdino/core/config.hpp"

namespace pcdino {
class MpiWorld;
}

namespace pcdino::train {

struct TrainRuntime {
  int threads = 0;             ///< LibTorch intra-op threads (0: LibTorch's default)
  int loader_threads = 0;      ///< decoding/augmentation threads; 0 = train_scDINO.num_workers
  bool resume = true;          ///< continue from checkpoint.pth in the output folder if there is one
  long long limit_images = 0;  ///< train on the first N images of the training split (0: all)
  long long stop_after_iterations =
      0;                           ///< checkpoint and stop after this many iterations, as on SIGTERM (tests)
  std::string output_dir;          ///< "" = {run_dir}/scDINO_ViTs/{dino_vit_name}
  std::string device = "auto";     ///< auto, cpu, cuda, cuda:N (select_device in device.hpp)
  std::string amp_dtype = "auto";  ///< use_fp16's autocast type: auto, float32, bfloat16, float16 (GPUs only)
  int local_rank = 0;              ///< this process's rank on its node without an MPI world
  double fusion_threshold_mb = 128;   ///< gradient fusion buffer size (Horovod's default), several ranks
  double comm_timeout_seconds = 300;  ///< several ranks: end (exit 74) after this long without progress
  /// Benchmarks only: every step trains on the same random crops made once on the device (the crop shapes
  /// of the configuration), so that loading and augmenting are not part of the step, as in
  /// bench/baseline_dino_step.py. The model learns nothing from them.
  bool synthetic_crops = false;
  /// Capture the step once as a CUDA graph after a few eager steps and replay it for the rest of the run
  /// (StepGraph), from the epoch the last layer is trained on; a CUDA device, float32 or bfloat16 (float16's
  /// loss scaling decides on the host whether to skip a step); with several ranks the NCCL allreduces are
  /// captured with the step (NCCL >= 2.9.6, CUDA >= 11.3). Refused (ConfigError) otherwise.
  bool cuda_graph = false;
  /// Benchmarks: the run's last epoch under the PyTorch profiler (KernelProfile): its kernels' GPU time per
  /// step, the step's kernel-time floor, goes into that epoch's metrics.jsonl record
  /// (kernel_seconds_per_step) and the log. A CUDA device; refused (ConfigError) otherwise. The profiler
  /// slows the host's side of that epoch, so its images/s are not the run's.
  bool profile_kernels = false;
  /// Tests: --cuda-graph's step (static crops, the schedules read from device scalars) run eagerly on any
  /// device, without a graph, to compare it with the ordinary step.
  bool graph_step_without_graph = false;
};

struct TrainReport {
  int epochs_done = 0;           ///< epochs finished (in total, including earlier runs)
  double last_epoch_loss = 0;    ///< mean loss of the last finished epoch in this run
  double images_per_second = 0;  ///< over this run's iterations
  bool interrupted = false;      ///< stopped on a signal after writing a checkpoint: resubmit to resume
  /// Images of this rank's batches that could not be read and were replaced (meta.skip_corrupt; without
  /// it the first one stops the training with a DataError naming the file, the last checkpoint kept).
  std::size_t corrupt_images_replaced = 0;
  std::string output_dir;
  /// use_fp16 on a CPU with --amp-dtype auto: the student's forward and backward timed in each precision
  /// at the start (images/s, summed over ranks), and the one trained in ("float32" or "bfloat16").
  double cpu_float32_images_per_second = 0, cpu_bfloat16_images_per_second = 0;
  std::string cpu_precision;
};

/// Trains. Reads the dataset and `{run_dir}/mean_and_std_of_dataset.txt`; writes into the output folder
/// checkpoint.pth after every epoch, checkpoint{epoch:04}.pth every saveckp_freq epochs, log.txt (one
/// JSON object per epoch: train_loss, train_lr, train_wd, epoch) and metrics.jsonl (also images/s,
/// momentum, ETA). A run interrupted and resumed ends with the same weights as an uninterrupted one.
/// Throws NoInputError (dataset, mean/std file), ConfigError (batch larger than the split), DataError
/// (a non-finite loss, a checkpoint of another architecture, an image that cannot be read: see
/// meta.skip_corrupt and TrainReport::corrupt_images_replaced).
///
/// With a `world` of several ranks it trains data-parallel (issue #5): rank r takes every ranks-th image of
/// each step's batch_size_per_gpu * ranks (the learning rate scales with that total), starts from rank
/// 0's weights, averages gradients with GradientFusion (MPI on CPU, NCCL on GPUs) and the DINO centre
/// over ranks, and only rank 0 writes. The GPU is the one of the local rank.
TrainReport run_training(const PipelineConfig& config, const TrainRuntime& runtime,
                         const MpiWorld* world = nullptr);

/// Installs SIGTERM and SIGUSR1 handlers (what Slurm sends before a time limit or preemption) that make
/// run_training checkpoint after the current iteration and return with `interrupted`.
void install_stop_signal_handlers();

}  // namespace pcdino::train
