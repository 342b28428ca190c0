#include "pcdino/monitoring/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pcdino/core/version.hpp"

namespace pcdino::monitoring {

namespace fs = std::filesystem;

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

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The files of this process, for remove_files_now().
std::mutex live_mutex;
std::set<std::string>& live_files() {
  static std::set<std::string> files;
  return files;
}

const MetricSpec& spec_of(const char* name, const std::string& stage, MetricType type, bool labelled) {
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

// Whether `path` is a metrics file of `labels`' stage on its node that an earlier process left: ended, or
// (`unfinished_too`) any.
bool replaced_by(const fs::path& path, const JobLabels& labels, bool unfinished_too) {
  std::ifstream in(path);
  std::string line;
  const std::string stage = "stage=\"" + labels.stage + "\"", node = "node=\"" + labels.node + "\"";
  bool ours = false, ended = false;
  while (std::getline(in, line)) {
    if (line.rfind("pcdino_build_info{", 0) == 0)
      ours = line.find(stage) != std::string::npos && line.find(node) != std::string::npos;
    if (line.rfind("pcdino_job_end_timestamp_seconds{", 0) == 0) ended = true;
  }
  return ours && (ended || unfinished_too);
}

}  // namespace

struct MetricsFile::Impl {
  MetricsFileOptions options;
  JobLabels labels;
  std::string path, temporary;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::mutex mutex;  // the map below and the writes
  std::map<std::string, prometheus::Counter*> counters;
  std::map<std::string, prometheus::Gauge*> gauges;
  std::map<std::string, prometheus::Histogram*> histograms;
  std::thread writer;
  std::mutex stop_mutex;
  std::condition_variable stop_signal;
  bool stopping = false;
  bool write_failed = false;  // logged once

  std::map<std::string, std::string> series_labels() const {
    return {{"slurm_job_id", labels.slurm_job_id},
            {"rank", std::to_string(labels.rank)},
            {"node", labels.node},
            {"stage", labels.stage}};
  }

  template <typename Metric, typename Builder>
  Metric& find(std::map<std::string, Metric*>& cache, const MetricSpec& spec, const std::string& label,
               Builder build) {
    const std::string key = std::string(spec.name) + '\0' + label;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return *it->second;
    auto& family = build().Name(spec.name).Help(spec.help).Labels(series_labels()).Register(*registry);
    std::map<std::string, std::string> extra;
    if (*spec.label != '\0') extra[spec.label] = label;
    Metric* metric = nullptr;
    if constexpr (std::is_same_v<Metric, prometheus::Histogram>) {
      metric = &family.Add(extra, step_duration_buckets());
    } else {
      metric = &family.Add(extra);
    }
    cache[key] = metric;
    return *metric;
  }

  void write() {
    std::ostringstream text;
    {
      std::lock_guard<std::mutex> lock(mutex);
      prometheus::TextSerializer().Serialize(text, registry->Collect());
    }
    std::error_code error;
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << text.str();
      out.flush();
      if (!out) error = std::make_error_code(std::errc::io_error);
    }
    if (!error) fs::rename(temporary, path, error);
    if (error && !write_failed) {
      write_failed = true;
      spdlog::warn("metrics: cannot write {}: {} (no metrics from this process)", path, error.message());
    }
  }
};

MetricsFile::MetricsFile(const MetricsFileOptions& options, const JobLabels& labels)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  m.labels = labels;
  if (std::none_of(metric_table().begin(), metric_table().end(),
                   [&](const MetricSpec& s) { return labels.stage == s.stage; })) {
    throw std::invalid_argument("metrics: '" + labels.stage + "' is not a stage with metrics");
  }
  std::error_code error;
  if (!options.dir.empty() && !fs::is_directory(options.dir, error)) {
    spdlog::info("metrics: no directory {} on this node (monitoring.textfile_dir): no metrics", options.dir);
  } else if (!options.dir.empty()) {
    const std::string name = "pcdino_" + labels.slurm_job_id + "_" + std::to_string(labels.rank) + ".prom";
    m.path = (fs::path(options.dir) / name).string();
    // A hidden name the collector skips (it reads *.prom), in the same folder so that rename is atomic.
    m.temporary = (fs::path(options.dir) / ("." + name + "." + std::to_string(::getpid()))).string();
    for (const auto& entry : fs::directory_iterator(options.dir, error)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("pcdino_", 0) == 0 && entry.path().extension() == ".prom" &&
          replaced_by(entry.path(), labels, options.replaces_unfinished))
        fs::remove(entry.path(), error);
    }
  }
  const auto& facts = build_facts();
  auto& info = prometheus::BuildGauge()
                   .Name("pcdino_build_info")
                   .Help(spec_of("pcdino_build_info", labels.stage, MetricType::kGauge, false).help)
                   .Labels(m.series_labels())
                   .Register(*m.registry)
                   .Add({{"version", version()},
                         {"libtorch", *facts.libtorch ? facts.libtorch : "none"},
                         {"cuda", facts.cuda},
                         {"nccl", facts.nccl},
                         {"mpi", facts.mpi}});
  info.Set(1);
  set("pcdino_stage_start_timestamp_seconds", unix_now());
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live_files().insert(m.path);
  }
  set_to_now("pcdino_heartbeat_timestamp_seconds");
  m.write();
  m.writer = std::thread([&m, this] {
    std::unique_lock<std::mutex> lock(m.stop_mutex);
    const auto period = std::chrono::duration<double>(m.options.interval_seconds);
    while (!m.stop_signal.wait_for(lock, period, [&m] { return m.stopping; })) {
      set_to_now("pcdino_heartbeat_timestamp_seconds");
      m.write();
    }
  });
}

MetricsFile::~MetricsFile() {
  Impl& m = *impl_;
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(m.stop_mutex);
    m.stopping = true;
  }
  m.stop_signal.notify_all();
  m.writer.join();
  set_to_now("pcdino_heartbeat_timestamp_seconds");
  set_to_now("pcdino_job_end_timestamp_seconds");
  m.write();
  std::error_code error;
  fs::remove(m.temporary, error);
  std::lock_guard<std::mutex> lock(live_mutex);
  live_files().erase(m.path);
}

bool MetricsFile::enabled() const {
  return !impl_->path.empty();
}

const std::string& MetricsFile::path() const {
  return impl_->path;
}

void MetricsFile::add(const char* name, double value, const std::string& label) {
  const auto& spec = spec_of(name, impl_->labels.stage, MetricType::kCounter, !label.empty());
  impl_->find(impl_->counters, spec, label, [] { return prometheus::BuildCounter(); }).Increment(value);
}

void MetricsFile::set(const char* name, double value, const std::string& label) {
  const auto& spec = spec_of(name, impl_->labels.stage, MetricType::kGauge, !label.empty());
  impl_->find(impl_->gauges, spec, label, [] { return prometheus::BuildGauge(); }).Set(value);
}

void MetricsFile::set_to_now(const char* name, const std::string& label) {
  set(name, unix_now(), label);
}

void MetricsFile::observe(const char* name, double value) {
  const auto& spec = spec_of(name, impl_->labels.stage, MetricType::kHistogram, false);
  impl_->find(impl_->histograms, spec, "", [] { return prometheus::BuildHistogram(); }).Observe(value);
}

void MetricsFile::write_now() {
  if (enabled()) impl_->write();
}

void remove_files_now() noexcept {
  std::lock_guard<std::mutex> lock(live_mutex);
  for (const auto& path : live_files()) ::unlink(path.c_str());
}

}  // namespace pcdino::monitoring
