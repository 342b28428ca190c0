// Prometheus metrics of every stage (issue #40), written as node-exporter textfile-collector files: one per
// process, `{dir}/pcdino_{slurm_job_id}_{rank}.prom`, rewritten every few seconds by a background thread
// (written to a hidden temporary name in the same folder, then renamed). When the process ends the file
// says so (pcdino_job_end_timestamp_seconds) with its final values, and the next process of the same stage
// on the node removes it: a node keeps at most one ended file per stage.
// Names follow Prometheus's naming rules (https://prometheus.io/docs/practices/naming/): the `pcdino_`
// prefix, base units (`_seconds`, `_bytes`), `_total` on counters, `_info` for build facts; labels are
// bounded (`slurm_job_id`, `rank`, `node`, `stage`, and one per metric from a fixed set: phase, check).
// The alert rules in monitoring/rules and the dashboard in monitoring/grafana use only these names
// (tests/monitoring/test_metric_names.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pcdino::monitoring {

enum class MetricType { kCounter, kGauge, kHistogram };

/// One metric pcdino exports.
struct MetricSpec {
  const char* name;  ///< full name, e.g. "pcdino_train_steps_total"
  MetricType type;
  const char* stage;  ///< the stage that exports it: train, extract, meanstd, doctor, or "" for every stage
  const char* label;  ///< its one label beyond the job's ("phase", "check"), or ""
  const char* help;   ///< Prometheus's HELP text: what it counts, in which unit
};

/// Every metric pcdino exports: the only names MetricsFile accepts, the dashboard and the rules may use.
const std::vector<MetricSpec>& metric_table();

/// metric_table() as a Markdown table (metric, type, stage, extra label, what it counts), one row per
/// metric: what `pcdino metrics` prints and docs/operations.md holds.
std::string metrics_markdown();

/// Upper bounds (seconds) of pcdino_train_step_duration_seconds's buckets: 5 ms to ~5.5 min, doubling.
const std::vector<double>& step_duration_buckets();

/// The labels every series of a process carries.
struct JobLabels {
  std::string slurm_job_id = "none";  ///< SLURM_JOB_ID; "none" outside Slurm
  int rank = 0;                       ///< the process's rank in its stage's world
  std::string node;                   ///< SLURMD_NODENAME, else the host name
  std::string stage;                  ///< train, extract, meanstd or doctor
};

/// The labels of this process from its environment (SLURM_JOB_ID, SLURMD_NODENAME or the host name).
JobLabels labels_from_environment(const std::string& stage, int rank);

struct MetricsFileOptions {
  std::string dir;              ///< the textfile collector's directory; "" = no metrics
  double interval_seconds = 5;  ///< rewrite period (the heartbeat's)
  /// Also replace earlier files of the stage on the node that did not end (a check aborted): the doctor's,
  /// whose last verdict per node is what counts. Otherwise only ended files are replaced, never a file of
  /// another process that may still run there.
  bool replaces_unfinished = false;
  /// The file's name in `dir`; "" = pcdino_{slurm_job_id}_{rank}.prom. The node check's verdict, written
  /// from a job's prolog beside that job's own rank 0, has a name of its node
  /// (pcdino_node_check_{node}.prom).
  std::string file_name = "";
};

/// This process's metrics file. Every series gets the JobLabels; the file also carries pcdino_build_info,
/// pcdino_stage_start_timestamp_seconds and pcdino_heartbeat_timestamp_seconds (set at each write).
/// Thread-safe. Where the directory is "" or does not exist, nothing is written (logged once) and every
/// call only checks its name.
class MetricsFile {
 public:
  /// Throws std::invalid_argument for a stage of no metric. Starts the writer thread when enabled.
  MetricsFile(const MetricsFileOptions& options, const JobLabels& labels);
  /// Stops the writer and writes the file one last time, marked ended.
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  bool enabled() const;
  /// The file's path ("" when not enabled).
  const std::string& path() const;

  /// Adds `value` (>= 0) to a counter. The name must be a counter of metric_table() for this stage, and
  /// `label` given exactly when the metric has one; std::invalid_argument otherwise (a programming error).
  void add(const char* name, double value, const std::string& label = "");
  /// Sets a gauge (same checks).
  void set(const char* name, double value, const std::string& label = "");
  /// Sets a gauge to the current Unix time (seconds).
  void set_to_now(const char* name, const std::string& label = "");
  /// One observation of a histogram (same checks).
  void observe(const char* name, double value);
  /// Writes the file now (the writer thread does every interval). Errors are logged, never thrown: metrics
  /// never stop a stage.
  void write_now();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Removes every metrics file of this process now, for a path that ends the process without unwinding
/// (the training watchdog's exit): a file left behind unmarked looks like a killed job (the stale-file
/// alert), while this job ended on purpose and restarts.
void remove_files_now() noexcept;

}  // namespace pcdino::monitoring
