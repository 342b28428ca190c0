#include "pcdino/monitoring/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/version.hpp"
#include "table.hpp"

namespace pcdino::monitoring {

namespace fs = std::filesystem;

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

// The most of a metrics file read to tell whose it is (its build_info line comes first).
constexpr std::size_t kMaxMetricsFileBytes = 1 << 20;

// Whether `path` is a metrics file of `labels`' stage on its node that an earlier process left: ended, or
// (`unfinished_too`) any. The folder is writable by every user: a FIFO, a link or a huge file there is
// nobody's (read_regular_file refuses the first two and reads at most 1 MiB of the last).
bool replaced_by(const fs::path& path, const JobLabels& labels, bool unfinished_too) {
  std::string text;
  try {
    text = read_regular_file(path.string(), kMaxMetricsFileBytes);
  } catch (const Error&) {
    return false;
  }
  std::istringstream in(text);
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
  std::string path, hidden, temporary;  // hidden: the temporaries' base name, a name the collector skips
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
    // A new temporary each time (O_EXCL, a random name): the folder is every user's, and a name known in
    // advance could be a link planted there.
    std::error_code error;
    try {
      const int fd = create_temporary(hidden, temporary, 0644);
      const std::string bytes = text.str();
      std::size_t written = 0;
      while (written < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          error = std::error_code(errno, std::generic_category());
          break;
        }
        written += static_cast<std::size_t>(n);
      }
      // create_temporary's mode is cut by the umask: the node exporter reads the file as another user.
      if (::fchmod(fd, 0644) != 0 && !error) error = std::error_code(errno, std::generic_category());
      if (::close(fd) != 0 && !error) error = std::error_code(errno, std::generic_category());
    } catch (const Error& e) {  // no temporary of ours to remove
      temporary.clear();
      error = std::make_error_code(std::errc::permission_denied);
      if (!write_failed) spdlog::warn("metrics: {}", e.what());
    }
    if (!error) fs::rename(temporary, path, error);
    if (error && !temporary.empty()) ::unlink(temporary.c_str());
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
  check_stage(labels.stage);
  std::error_code error;
  if (!options.dir.empty() && !fs::is_directory(options.dir, error)) {
    spdlog::info("metrics: no directory {} on this node (monitoring.textfile_dir): no metrics", options.dir);
  } else if (!options.dir.empty()) {
    const std::string name = !options.file_name.empty() ? options.file_name
                                                        : "pcdino_" + labels.slurm_job_id + "_" +
                                                              std::to_string(labels.rank) + ".prom";
    m.path = (fs::path(options.dir) / name).string();
    // A hidden name the collector skips (it reads *.prom), in the same folder so that rename is atomic.
    m.hidden = (fs::path(options.dir) / ("." + name)).string();
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
                   .Help(checked_spec("pcdino_build_info", labels.stage, MetricType::kGauge, false).help)
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
  const auto& spec = checked_spec(name, impl_->labels.stage, MetricType::kCounter, !label.empty());
  impl_->find(impl_->counters, spec, label, [] { return prometheus::BuildCounter(); }).Increment(value);
}

void MetricsFile::set(const char* name, double value, const std::string& label) {
  const auto& spec = checked_spec(name, impl_->labels.stage, MetricType::kGauge, !label.empty());
  impl_->find(impl_->gauges, spec, label, [] { return prometheus::BuildGauge(); }).Set(value);
}

void MetricsFile::set_to_now(const char* name, const std::string& label) {
  set(name, unix_now(), label);
}

void MetricsFile::observe(const char* name, double value) {
  const auto& spec = checked_spec(name, impl_->labels.stage, MetricType::kHistogram, false);
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
