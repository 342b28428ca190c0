// MetricsFile in a build without prometheus-cpp (an OS that does not package it: Ubuntu 22.04 has none,
// 24.04 and Debian 12 do): the same names are checked, nothing is written, and the first file a process
// asks for says why, once.
#include <spdlog/spdlog.h>

#include "pcdino/monitoring/metrics.hpp"
#include "table.hpp"

namespace pcdino::monitoring {

struct MetricsFile::Impl {
  JobLabels labels;
  std::string path;  // always "": never enabled
};

MetricsFile::MetricsFile(const MetricsFileOptions& options, const JobLabels& labels)
    : impl_(std::make_unique<Impl>()) {
  check_stage(labels.stage);
  impl_->labels = labels;
  static bool said = false;
  if (!options.dir.empty() && !said) {
    said = true;
    spdlog::info("metrics: this pcdino was built without prometheus-cpp: no metrics in {}", options.dir);
  }
}

MetricsFile::~MetricsFile() = default;

bool MetricsFile::enabled() const {
  return false;
}

const std::string& MetricsFile::path() const {
  return impl_->path;
}

void MetricsFile::add(const char* name, double /*value*/, const std::string& label) {
  checked_spec(name, impl_->labels.stage, MetricType::kCounter, !label.empty());
}

void MetricsFile::set(const char* name, double /*value*/, const std::string& label) {
  checked_spec(name, impl_->labels.stage, MetricType::kGauge, !label.empty());
}

void MetricsFile::set_to_now(const char* name, const std::string& label) {
  set(name, 0, label);
}

void MetricsFile::observe(const char* name, double /*value*/) {
  checked_spec(name, impl_->labels.stage, MetricType::kHistogram, false);
}

void MetricsFile::write_now() {}

void remove_files_now() noexcept {}

}  // namespace pcdino::monitoring
