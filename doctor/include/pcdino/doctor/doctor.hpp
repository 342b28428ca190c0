// `pcdino doctor` (issue #21): checks every node of an allocation before an expensive job does, one MPI
// rank per node, and says which node to drain and why. Every probe has a time limit; a node that does not
// answer is reported as such and the check ends in bounded time.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/version.hpp"
#include "pcdino/doctor/bandwidth.hpp"
#include "pcdino/doctor/nccl.hpp"
#include "pcdino/spank/plugin_file.hpp"

namespace pcdino {
class MpiWorld;
struct PipelineConfig;
}  // namespace pcdino

namespace pcdino::doctor {

/// What to check and the floors to check against. Every floor of 0 is not judged. What a pipeline's
/// doctor: section sets starts at that section's defaults (DoctorConfig), so each is written once.
struct DoctorOptions {
  DoctorOptions();  ///< the doctor: section's defaults; the shared filesystem not checked

  std::string shared_dir;   ///< the shared filesystem to probe ("" = not checked)
  std::size_t probe_bytes;  ///< bytes each node writes to and reads from it
  double min_write_mb_s;    ///< floors of the shared filesystem's throughput (MB/s)
  double min_read_mb_s;
  std::string scratch_dir;                    ///< local scratch ("" = not checked)
  double min_scratch_gib;                     ///< free space it needs (GiB)
  std::vector<std::string> expect_variables;  ///< variables the step must have (the SPANK profile's)
  std::vector<std::string> expect_providers;  ///< libfabric providers that must be there (efa on EFA types)
  std::string manifest;  ///< the image manifest the node's versions are compared with ("" = not checked;
                         ///< absent = skipped)
  bool check_slurm_view = true;  ///< compare CPUs, memory and GPUs with `scontrol show node`
  double slow_fraction = 0.5;    ///< a node whose memory bandwidth is below this share of the
                                 ///< nodes' median is slow (a starved or faulty node)
  std::vector<std::size_t> sizes = {1u << 10, 1u << 14, 1u << 18, 1u << 22, 1u << 24};  ///< allreduce sweep
  int reps = 5;           ///< timed allreduces per size
  double min_busbw_gb_s;  ///< floor of the largest size's bus bandwidth (GB/s)
  bool nccl;              ///< on nodes with GPUs: the CUDA runtime and NCCL load, and NCCL's
                          ///< allreduce across every GPU of every node (nccl_allreduce_sweep())
  std::vector<std::size_t> nccl_sizes = {1u << 20, 1u << 24, 1u << 28, 1u << 30};  ///< its sweep (bytes)
  double min_nccl_busbw_gb_s;      ///< floor at its largest size (GB/s); 0 = the published floor of the
                                   ///< nodes' instance type (nccl_floor()), none when there is none
  double probe_seconds = 60;       ///< time limit of each probe on a node
  double answer_seconds = 120;     ///< how long rank 0 waits for a node's report
  double allreduce_seconds = 120;  ///< time limit of the whole allreduce sweep
  /// Where each rank writes its node's verdict as Prometheus metrics (the node exporter's textfile
  /// collector, monitoring.textfile_dir; "" = none); the file stays after the check, marked ended.
  std::string textfile_dir = MonitoringConfig{}.textfile_dir;
};

/// What a failed check means for its node (issue #60).
enum class Severity {
  kDrain,  ///< no job may start there: the node check drains it, and the doctor calls it unhealthy
  kWarn,   ///< logged and exported as a metric; jobs still start there
};

/// "drain" or "warn", as the reports write it.
const char* severity_name(Severity severity);

/// One check of one node: its name (a column of the table), verdict and what was seen.
struct Check {
  std::string name;
  bool ok = true;
  std::string detail;
  Severity severity = Severity::kDrain;  ///< what it means when not ok
};

/// One node's checks, as its rank reported them.
struct NodeReport {
  std::string node;  ///< Slurm's node name (SLURMD_NODENAME), else the host name
  int rank = 0;
  bool answered = false;      ///< false: no report within answer_seconds
  double memory_gb_s = 0;     ///< memory_bandwidth_gb_s() of the node
  std::string instance_type;  ///< the EC2 instance type among Slurm's features of the node ("" = none)
  int cuda_gpus = 0;          ///< GPUs the CUDA runtime shows the task (0: no GPU, or not checked)
  double fs_write_mb_s = 0;   ///< the shared filesystem's write and read throughput (0: not measured)
  double fs_read_mb_s = 0;
  std::vector<Check> checks;

  /// Answered and every check ok or only a warning (Severity::kWarn).
  bool healthy() const;
  /// The failed checks' details joined, warnings left out ("did not answer within N s" when it did not
  /// answer).
  std::string reason() const;
};

/// The whole allocation: rank 0's view after run_doctor().
struct DoctorReport {
  std::vector<NodeReport> nodes;          ///< in rank order
  std::vector<AllreducePoint> allreduce;  ///< empty when not measured (one node, or a node did not answer)
  /// When the group's busbw is below the floor on 3 nodes or more: pair k's busbw (ranks k, k+1 mod n).
  std::vector<double> pairs_busbw_gb_s;
  std::string allreduce_note;  ///< why not measured, or the floor's verdict
  bool allreduce_ok = true;
  double min_busbw_gb_s = 0;
  std::vector<AllreducePoint> nccl;  ///< NCCL's sweep over every GPU; empty when not measured
  int nccl_gpus = 0;                 ///< GPUs in its communicator
  std::string nccl_note;             ///< why not measured, or the floor's verdict ("" = not asked for)
  bool nccl_ok = true;
  double min_nccl_busbw_gb_s = 0;  ///< the floor applied (0 = none)

  bool healthy() const;
};

/// A setting that a pipeline's doctor: section (monitoring: for one) and `pcdino doctor`'s command line both
/// give. section_options() is the one list of them: apply_config() and the launch (section_arguments()) walk
/// it, and with a pipeline file the command line refuses its options.
struct SectionOption {
  const char* option;  ///< the command line's, e.g. "--probe-mb"
  const char* key;  ///< the pipeline file's, as core's schema (config_schema()) names it: "doctor.probe_mb"
  /// Sets the option from the doctor: section (nullptr: apply_config() sets it from another section, or it is
  /// not an option of the check, as --drain).
  void (*apply)(const DoctorConfig& section, DoctorOptions& options);
  /// Its value as the command line gives it (nullopt: left out; nullptr: a flag the launch hands on itself).
  std::optional<std::string> (*value)(const DoctorOptions& options);
};

/// The settings a doctor: section shares with the command line, in the order they are handed on; the keys are
/// every doctor.* key of the schema but doctor.enabled, and monitoring.textfile_dir.
const std::vector<SectionOption>& section_options();

/// The command line that gives the ranks what section_options() values `options` holds: {"--shared-dir",
/// "/fsx", "--probe-mb", "64", ...} (numbers as "{:g}", lists comma-separated, flags left out).
std::vector<std::string> section_arguments(const DoctorOptions& options);

/// Sets what a pipeline's `doctor:` section decides in `options` (the probes, floors and expectations; not
/// the time limits): the shared directory ("" there = the run folder), the variables (doctor.expect_env
/// and the names of slurm.environment, which the training's tasks must have), providers and floors.
void apply_config(const PipelineConfig& config, DoctorOptions& options);

/// The checks of this node (no MPI): shared filesystem, scratch, Slurm's view of the node (and its instance
/// type), variables, libfabric providers, versions against the image manifest, on a node with NVIDIA devices
/// the CUDA runtime and NCCL (probe_gpu_stack(), when options.nccl), memory bandwidth; each under
/// options.probe_seconds. `node` names the node.
NodeReport probe_this_node(const DoctorOptions& options, const std::string& node);

/// The gpu_stack check of a node with NVIDIA devices from probe_gpu_stack()'s `stack`: ok when the runtime
/// and NCCL load and show GPUs. A Slurm job given none of the node's GPUs (`job_has_gpus` false:
/// slurm_job_has_gpus()) uses none of them, whatever the runtime shows (they may be another job's): ok,
/// telling it to ask for them, when the libraries load and the runtime shows GPUs or none
/// (cudaErrorNoDevice: Slurm's device constraint); any other runtime error is the node's.
Check judge_gpu_stack(const GpuStack& stack, std::optional<bool> job_has_gpus);

/// The spank_plugin check: the SPANK plugin at `path` was built for Slurm `plugin` (spank::
/// plugin_slurm_version()) and the node runs Slurm `slurm`; ok when their major.minor agree (Slurm loads no
/// other), else names both versions and the rebuild to do.
Check judge_spank_plugin(const std::string& path, const spank::SlurmVersion& plugin,
                         const spank::SlurmVersion& slurm);

/// The Slurm this node runs, from `scontrol --version`. Throws Error(kUnavailable) when srun cannot be
/// started or prints no version (its error line named).
spank::SlurmVersion running_slurm_version();

/// The spank_plugin check of this node: the spank_pcdino.so that the plugstack.conf files `plugstack`
/// (the first that exists, and the files its `include` lines name) list, against `scontrol --version`. Not
/// judged (ok, said so) when no plugstack.conf lists the plugin; a failure is Severity::kDrain for a
/// `required` line (Slurm fails every launch) and kWarn for an `optional` one (Slurm skips it).
Check check_spank_plugin(const std::vector<std::string>& plugstack);

/// The plugstack.conf files Slurm may read: PlugStackConfig's default beside $SLURM_CONF, then
/// ParallelCluster's /opt/slurm/etc and Debian's /etc/slurm.
std::vector<std::string> default_plugstack_files();

/// The trainer check of a node with `gpus` NVIDIA devices: a pcdino whose LibTorch has no CUDA (`facts`:
/// build_facts()) fails, naming its LibTorch (a CPU trainer on a GPU node is a broken image, not a slow job).
Check judge_trainer(const BuildFacts& facts, int gpus);

/// Runs on every rank of `world` (one per node): each probes its node, rank 0 collects the reports
/// (waiting at most answer_seconds in all; a rank that did not answer is named from the step's node list,
/// SLURM_STEP_NODELIST, one task per node), judges the slow nodes, and, when all answered, every rank runs
/// the allreduce sweep under a watchdog; below the floor on 3 nodes or more, pairs of neighbours
/// (pairwise_busbw()) and a "network" check failed on each node slow_ranks() blames. Then, when every node's
/// CUDA runtime shows GPUs and options.nccl (one GPU in all: run, its rows dropped, not judged), NCCL's sweep
/// (nccl_allreduce_sweep()) under its own watchdog, judged against options.min_nccl_busbw_gb_s or
/// nccl_floor(). Returns the full report on rank 0 and this node's alone elsewhere; when a node did not
/// answer the caller must end the job (MPI_Abort), since a stopped rank never reaches MPI_Finalize. If the
/// sweep has not ended after allreduce_seconds, rank 0 calls `on_timeout` with the report as it stands and
/// every rank ends the process with exit code 1.
DoctorReport run_doctor(const DoctorOptions& options, const MpiWorld& world,
                        const std::function<void(const DoctorReport&)>& on_timeout);

/// The table printed for the admin: one row per node (node, verdict, each check), the allreduce sweeps
/// (size, time, algbw, busbw: MPI's, then NCCL's) and their verdicts.
std::string format_table(const DoctorReport& report);

/// doctor.json: {"healthy", "nodes": [{"node", "rank", "answered", "healthy", "memory_gb_s", "instance_type",
/// "cuda_gpus", "checks": [{"name", "ok", "detail"}], "drain"}], "allreduce": {"ok", "note",
/// "min_busbw_gb_s", "points": [{"bytes", "seconds", "algbw_gb_s", "busbw_gb_s"}], "pairs_busbw_gb_s": [pair
/// k of ranks k, k+1 mod n]}, "nccl": {"ok", "note", "gpus", "min_busbw_gb_s", "points"}}.
std::string format_json(const DoctorReport& report);

/// One line for logs and `pcdino status`: "healthy", or "unhealthy: node2 (environment: missing X);
/// allreduce: ..." naming every failed node with its failed checks, and each allreduce's verdict if it
/// failed ("nccl allreduce: ...").
std::string summary(const DoctorReport& report);

/// The `scontrol update NodeName=... State=DRAIN Reason="pcdino doctor: ..."` line for each unhealthy
/// node, as argument vectors (run with run_process) in rank order.
std::vector<std::vector<std::string>> drain_commands(const DoctorReport& report);

/// Rank 0, from the nodes' reports: why NCCL's sweep cannot run ("" when it can): a node with another
/// vendor's accelerators (a check of vendor_probes() found them; NCCL is NVIDIA's, the note names their
/// vendor's collectives test), or a node whose CUDA runtime shows no GPU. One GPU in all runs it too (no bus
/// bandwidth, nothing judged).
std::string nccl_blocker(const std::vector<NodeReport>& nodes);

}  // namespace pcdino::doctor
