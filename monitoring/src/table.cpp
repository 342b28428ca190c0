#include "table.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::monitoring {

const std::vector<MetricSpec>& metric_table() {
  using T = MetricType;
  static const std::vector<MetricSpec> table = {
      // Every stage.
      {"pcdino_build_info", T::kGauge, "", "",
       "pcdino's build: version and the LibTorch, CUDA, NCCL and MPI it was built against (value 1)"},
      {"pcdino_stage_start_timestamp_seconds", T::kGauge, "", "", "When this process started (Unix time)"},
      {"pcdino_heartbeat_timestamp_seconds", T::kGauge, "", "",
       "When this process last wrote its metrics file (Unix time): stops advancing when it is killed or "
       "stopped"},
      {"pcdino_job_end_timestamp_seconds", T::kGauge, "", "",
       "When this process ended: its file stays, with its final values, until the next of its stage on the "
       "node"},
      // Training.
      {"pcdino_train_steps_total", T::kCounter, "train", "", "Training steps this rank finished"},
      {"pcdino_train_samples_total", T::kCounter, "train", "", "Images this rank trained on"},
      {"pcdino_train_step_duration_seconds", T::kHistogram, "train", "",
       "Wall time of each training step on this rank's host, loading included"},
      {"pcdino_train_phase_seconds_total", T::kCounter, "train", "phase",
       "Seconds of this rank's steps per phase: data, forward, backward (with the gradient allreduce), "
       "update"},
      {"pcdino_train_allreduce_wait_seconds_total", T::kCounter, "train", "",
       "Seconds this rank's host waited in collectives (gradients, DINO centre, stop agreement)"},
      {"pcdino_train_allreduce_bytes_total", T::kCounter, "train", "",
       "Bytes of gradients this rank allreduced"},
      {"pcdino_train_loss", T::kGauge, "train", "", "DINO loss, mean of the last 10 steps"},
      {"pcdino_train_teacher_entropy", T::kGauge, "train", "",
       "Entropy of the teacher's output (nats), mean of the last 10 steps: near 0 or log(out_dim) is "
       "collapse"},
      {"pcdino_train_kl_divergence", T::kGauge, "train", "",
       "Loss minus teacher entropy (nats), mean of the last 10 steps: near 0 is collapse"},
      {"pcdino_train_learning_rate", T::kGauge, "train", "", "Learning rate of the last step"},
      {"pcdino_train_epoch", T::kGauge, "train", "", "Epochs finished"},
      {"pcdino_train_last_step_timestamp_seconds", T::kGauge, "train", "",
       "When this rank last finished a step (Unix time; its start before the first)"},
      {"pcdino_train_last_checkpoint_timestamp_seconds", T::kGauge, "train", "",
       "When rank 0 last wrote checkpoint.pth (Unix time; its start before the first)"},
      // Extraction and mean/std.
      {"pcdino_extract_images_total", T::kCounter, "extract", "", "Images this rank embedded"},
      {"pcdino_extract_images_per_second", T::kGauge, "extract", "", "This rank's embedding rate so far"},
      {"pcdino_meanstd_images_total", T::kCounter, "meanstd", "", "Images this rank read for the mean/std"},
      {"pcdino_meanstd_images_per_second", T::kGauge, "meanstd", "", "This rank's mean/std rate so far"},
      // The doctor.
      {"pcdino_doctor_check_ok", T::kGauge, "doctor", "check",
       "1 when the node passed the check, 0 when not"},
      {"pcdino_doctor_node_healthy", T::kGauge, "doctor", "", "1 when the node passed every check"},
      {"pcdino_doctor_drain_withheld", T::kGauge, "doctor", "check",
       "1 when the node check did not drain the node for the check's finding: its partitions' nodes "
       "already drained for it reach DrainGuardPercent"},
      {"pcdino_doctor_shared_fs_write_bytes_per_second", T::kGauge, "doctor", "",
       "The node's write throughput to the shared filesystem"},
      {"pcdino_doctor_shared_fs_read_bytes_per_second", T::kGauge, "doctor", "",
       "The node's read throughput from the shared filesystem"},
      {"pcdino_doctor_allreduce_busbw_bytes_per_second", T::kGauge, "doctor", "",
       "MPI allreduce bus bandwidth between the nodes at the largest size (rank 0)"},
      {"pcdino_doctor_nccl_busbw_bytes_per_second", T::kGauge, "doctor", "",
       "NCCL allreduce bus bandwidth over every GPU at the largest size (rank 0)"},
  };
  return table;
}

const std::vector<double>& step_duration_buckets() {
  static const std::vector<double> bounds = [] {
    std::vector<double> b;
    for (double s = 0.005; s < 400; s *= 2) b.push_back(s);
    return b;
  }();
  return bounds;
}

JobLabels labels_from_environment(const std::string& stage, int rank) {
  JobLabels l;
  l.stage = stage;
  l.rank = rank;
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) l.slurm_job_id = job;
  if (const char* node = std::getenv("SLURMD_NODENAME"); node && *node) {
    l.node = node;
  } else {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    l.node = host;
  }
  return l;
}

const MetricSpec& checked_spec(const char* name, const std::string& stage, MetricType type, bool labelled) {
  for (const auto& s : metric_table()) {
    if (std::strcmp(s.name, name) != 0) continue;
    if (s.type != type) throw std::invalid_argument(std::string(name) + ": used as another metric type");
    if (*s.stage != '\0' && stage != s.stage) {
      throw std::invalid_argument(std::string(name) + ": a metric of stage " + s.stage + ", not " + stage);
    }
    if ((*s.label != '\0') != labelled) {
      throw std::invalid_argument(std::string(name) + (labelled ? ": takes no label" : ": needs its label"));
    }
    return s;
  }
  throw std::invalid_argument(std::string(name) + ": not in pcdino's metric table (monitoring/metrics.hpp)");
}

std::string metrics_markdown() {
  static const char* const kTypes[] = {"counter", "gauge", "histogram"};
  std::string out = "| metric | type | stage | extra label | what |\n|---|---|---|---|---|\n";
  for (const auto& s : metric_table()) {
    out += std::string("| `") + s.name + "` | " + kTypes[static_cast<int>(s.type)] + " | " +
           (*s.stage != '\0' ? s.stage : "every stage") + " | " +
           (*s.label != '\0' ? std::string("`") + s.label + "`" : "") + " | " + s.help + " |\n";
  }
  return out;
}

void check_stage(const std::string& stage) {
  const auto& table = metric_table();
  if (std::any_of(table.begin(), table.end(), [&](const MetricSpec& s) { return s.stage == stage; })) return;
  throw std::invalid_argument("metrics: '" + stage + "' is not a stage with metrics");
}

}  // namespace pcdino::monitoring
