// The doctor's settings that a pipeline file's doctor: section shares with the command line: one row each.
#include <fmt/format.h>

#include <algorithm>

#include "pcdino/core/config.hpp"
#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

namespace {

// A value as the command line gives it.
std::optional<std::string> text(double v) {
  return fmt::format("{:g}", v);
}
std::optional<std::string> text(const std::string& s) {
  return s;
}
std::optional<std::string> text(bool b) {
  return std::string(b ? "true" : "false");
}
std::optional<std::string> text(const std::vector<std::string>& items) {
  if (items.empty()) return std::nullopt;
  std::string joined;
  for (const auto& i : items) joined += (joined.empty() ? "" : ",") + i;
  return joined;
}

// A row whose section field and option hold the same value.
template <auto Section, auto Option>
SectionOption same(const char* option, const char* key) {
  return {option, key, [](const DoctorConfig& d, DoctorOptions& o) { o.*Option = d.*Section; },
          [](const DoctorOptions& o) { return text(o.*Option); }};
}

using D = DoctorConfig;
using O = DoctorOptions;

}  // namespace

const std::vector<SectionOption>& section_options() {
  static const std::vector<SectionOption> rows = {
      same<&D::shared_dir, &O::shared_dir>("--shared-dir", "doctor.shared_dir"),
      {"--probe-mb", "doctor.probe_mb",
       [](const D& d, O& o) { o.probe_bytes = static_cast<std::size_t>(d.probe_mb * 1e6); },
       [](const O& o) { return text(static_cast<double>(o.probe_bytes) / 1e6); }},
      same<&D::min_write_mb_s, &O::min_write_mb_s>("--min-write-mb-s", "doctor.min_write_mb_s"),
      same<&D::min_read_mb_s, &O::min_read_mb_s>("--min-read-mb-s", "doctor.min_read_mb_s"),
      same<&D::scratch, &O::scratch_dir>("--scratch", "doctor.scratch"),
      {"--textfile-dir", "monitoring.textfile_dir", nullptr, [](const O& o) { return text(o.textfile_dir); }},
      same<&D::min_scratch_gib, &O::min_scratch_gib>("--min-scratch-gib", "doctor.min_scratch_gib"),
      same<&D::expect_env, &O::expect_variables>("--expect-env", "doctor.expect_env"),
      same<&D::expect_providers, &O::expect_providers>("--expect-provider", "doctor.expect_providers"),
      same<&D::min_busbw_gbps, &O::min_busbw_gb_s>("--min-busbw-gbps", "doctor.min_busbw_gbps"),
      same<&D::nccl, &O::nccl>("--nccl", "doctor.nccl"),
      same<&D::min_nccl_busbw_gbps, &O::min_nccl_busbw_gb_s>("--min-nccl-busbw-gbps",
                                                             "doctor.min_nccl_busbw_gbps"),
      same<&D::manifest, &O::manifest>("--manifest", "doctor.manifest"),
      {"--drain", "doctor.drain", nullptr, nullptr},  // the launch's, not the check's
  };
  return rows;
}

std::vector<std::string> section_arguments(const DoctorOptions& options) {
  std::vector<std::string> arguments;
  for (const auto& row : section_options()) {
    if (row.value == nullptr) continue;
    if (const auto value = row.value(options)) arguments.insert(arguments.end(), {row.option, *value});
  }
  return arguments;
}

DoctorOptions::DoctorOptions() {
  const DoctorConfig defaults;
  for (const auto& row : section_options())
    if (row.apply != nullptr) row.apply(defaults, *this);
}

void apply_config(const PipelineConfig& config, DoctorOptions& options) {
  for (const auto& row : section_options())
    if (row.apply != nullptr) row.apply(config.doctor, options);
  // "" in the section: the run folder, where the checkpoints go.
  if (options.shared_dir.empty()) options.shared_dir = config.run_dir();
  options.textfile_dir = config.monitoring.textfile_dir;
  for (const auto& [name, value] : config.slurm.environment) {
    const auto& v = options.expect_variables;
    if (std::find(v.begin(), v.end(), name) == v.end()) options.expect_variables.push_back(name);
  }
}

}  // namespace pcdino::doctor
