// The run layout: every path a run has under `{output_dir}/{name_of_run}/`, named here once and used by the
// stages that write and read them (tests/core/test_run_layout.sh checks that no other C++ source of the
// components joins them into a path; scripts/demo reads two of them for its summary).
// The names are the workshop's and scDINO's, so that its users and their scripts find what they expect:
//
//   mean_and_std_of_dataset.txt  run_config_dump.yaml  skipped_images.txt        (meanstd)
//   scDINO_ViTs/{dino_vit_name}/ checkpoint.pth checkpoint.prev.pth checkpoint{epoch:04}.pth log.txt
//                                metrics.jsonl                                    (train)
//   CLS_features/                features.h5, channel{_names}_model_{model}_features.csv,
//                                class_labels.csv, image_paths.csv                (extract, labels)
//   kNN/                         global_kNN.txt knn.json                          (knn)
//   plots/                       index.html and the figures                       (plots)
//   logs/                        submitted_pipeline.yaml pipeline_jobs.json {stage}.sbatch
//                                {stage}.complete {stage}_out_{job}.out {stage}_err_{job}.err  (submit)
//                                {stage}_restarts.jsonl                           (a requeued stage's starts)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino {

/// The files of one model folder (`scDINO_ViTs/{dino_vit_name}/`, or a folder given on the command line).
struct ModelFiles {
  /// How every checkpoint's file name begins (the three below); a killed writer's temporaries are found
  /// by it.
  static constexpr const char* kCheckpointPrefix = "checkpoint";

  std::string dir;
  std::string checkpoint() const;                 ///< checkpoint.pth: the latest, resumed from
  std::string previous_checkpoint() const;        ///< checkpoint.prev.pth: the one before it (a fallback)
  std::string epoch_checkpoint(int epoch) const;  ///< checkpoint{epoch:04}.pth (saveckp_freq)
  std::string training_log() const;               ///< log.txt: one JSON line per epoch (DINO's)
  std::string metrics() const;                    ///< metrics.jsonl: pcdino's per-iteration records
};

/// Every path under a run's folder. All members are full paths.
struct RunLayout {
  explicit RunLayout(const PipelineConfig& config);

  std::string run_dir;           ///< {output_dir}/{name_of_run}
  std::string mean_std;          ///< mean_and_std_of_dataset.txt
  std::string config_dump;       ///< run_config_dump.yaml: the effective configuration of the meanstd stage
  std::string skipped_images;    ///< skipped_images.txt (meta.skip_corrupt)
  ModelFiles model;              ///< scDINO_ViTs/{dino_vit_name}/
  std::string features_dir;      ///< CLS_features/
  std::string features;          ///< CLS_features/features.h5
  std::string knn_dir;           ///< kNN/
  std::string knn_text;          ///< kNN/global_kNN.txt (the workshop's lines)
  std::string knn_json;          ///< kNN/knn.json
  std::string plots_dir;         ///< plots/
  std::string plots_index;       ///< plots/index.html
  std::string logs_dir;          ///< logs/
  std::string submitted_config;  ///< logs/submitted_pipeline.yaml: the configuration the jobs read
  std::string job_state;         ///< logs/pipeline_jobs.json: job ids of the last submission
  std::string doctor_report;     ///< logs/doctor.json: the doctor stage's last report

  std::string stage_script(const std::string& stage) const;  ///< logs/{stage}.sbatch
  std::string stage_marker(const std::string& stage) const;  ///< logs/{stage}.complete
  /// logs/{stage}_restarts.jsonl: one line per start of a requeued job after its first (the batch script's)
  std::string stage_restarts(const std::string& stage) const;
  /// logs/{stage}_out_{job}.out (or _err_ .err with `error`); job "%j" gives sbatch's pattern.
  std::string stage_output(const std::string& stage, const std::string& job, bool error) const;
};

/// The CSV exports in a features folder: scDINO's `channel{channel_names}_model_{model}_features.csv`,
/// `class_labels.csv` and `image_paths.csv`.
std::string features_csv(const std::string& dir, const std::string& channel_names, const std::string& model);
std::string class_labels_csv(const std::string& dir);
std::string image_paths_csv(const std::string& dir);

/// Per-channel normalisation statistics, in the order of the selected channels.
struct MeanStdValues {
  std::vector<double> mean;
  std::vector<double> std;
};

/// The workshop's format: a JSON object {"mean": [...], "std": [...]} with full double precision.
std::string format_mean_std(const MeanStdValues& values);

/// Reads a file written by format_mean_std() (or by scDINO's mean_std_dataset.py). Throws NoInputError
/// if it cannot be read, DataError naming the file if it is not such an object or the lists differ in
/// length or a std is not > 0.
MeanStdValues read_mean_std(const std::string& path);

/// One line of a model folder's log.txt, one per epoch: main_dino.py's record (`epoch`, `train_loss`,
/// `train_lr`, `train_wd`) and pcdino's `train_teacher_entropy`, `train_kl` (nats) and `online_knn_top1`
/// (percent, when the online kNN ran that epoch). Written by the trainer, read by the plots stage.
struct TrainingLogLine {
  int epoch = 0;  ///< 0-based, as DINO writes it
  double loss = 0, lr = 0, wd = 0;
  std::optional<double> teacher_entropy, kl, online_knn_top1;  ///< absent in DINO's own logs
};

/// The line as JSON (no newline).
std::string format_training_log_line(const TrainingLogLine& line);

/// Every line of a log.txt, pcdino's or DINO's own. Throws NoInputError if it cannot be read, DataError
/// naming the file and line for a line that is not such a record.
std::vector<TrainingLogLine> read_training_log(const std::string& path);

/// One record of a model folder's metrics.jsonl (JSON lines, pcdino's own): "start" (the untrained
/// teacher's online kNN), "iteration" (every 10 iterations: means over them) and "epoch" (means over the
/// epoch, speed and the time per step's phases).
struct MetricsRecord {
  enum class Kind { kStart, kIteration, kEpoch };
  Kind kind = Kind::kIteration;
  int epoch = 0;       ///< 0-based (iteration and epoch records)
  long iteration = 0;  ///< iteration records: the last global iteration of the window, 1-based
  double loss = 0, teacher_entropy = 0, kl = 0;  ///< nats
  double lr = 0, wd = 0, momentum = 0;           ///< at the record's last iteration
  std::optional<double> online_knn_top1;         ///< percent; start and epoch records, when it ran
  // Epoch records only.
  double images_per_second = 0;
  double eta_seconds = 0;
  struct StepPhases {
    double data_wait = 0, forward = 0, backward = 0, update = 0;  ///< seconds per step
  } seconds_per_step;
  /// What timed them: "cuda_events" (the device's timeline) or "host_clock" (also files without the key).
  std::string phase_clock = "host_clock";
  /// `pcdino train --profile-kernels`' epoch: its kernels' GPU time per step (seconds, CUPTI), the step's
  /// kernel-time floor.
  std::optional<double> kernel_seconds_per_step;
  /// One loader thread's seconds to make one batch of this rank (read, decode, every crop), over the
  /// epoch's batches; absent without a loader (--synthetic-crops).
  std::optional<double> loader_seconds_per_batch;
};

/// The record as JSON (no newline).
std::string format_metrics_record(const MetricsRecord& record);

/// Every record of a metrics.jsonl. Throws NoInputError if it cannot be read, DataError naming the file
/// and line for a line that is not such a record.
std::vector<MetricsRecord> read_metrics(const std::string& path);

}  // namespace pcdino
