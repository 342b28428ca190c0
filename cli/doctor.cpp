// pcdino doctor: the health check of an allocation's nodes, one MPI rank per node (issue #21).
#include "pcdino/doctor/doctor.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/log.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/monitoring/metrics.hpp"
#include "pcdino/sbatch/submitter.hpp"

namespace pcdino::cli {

namespace {

struct DoctorArgs {
  doctor::DoctorOptions options;
  std::string config;             // --config: the settings of a pipeline file's doctor: section
  std::vector<std::string> sets;  // --set overrides of its keys
  double probe_mb = DoctorConfig{}.probe_mb;
  std::string json;
  bool drain = false;
  bool no_slurm_view = false;
  // --submit
  bool submit = false;
  int nodes = 0;
  int gpus_per_node = -1;  // --submit: GPUs each node's task gets (-1: --config's, else none)
  std::string partition, time = "10:00", log = "pcdino-doctor-%j.out";
  std::string mpi = "pmix";            // srun's --mpi plugin (the file's slurm.mpi with --config)
  std::vector<std::string> forwarded;  // the options the job's ranks get
};

// The options a pipeline's doctor: section also sets, with its key (beside --config, --set changes them)
// and the value the section gave them (nullopt: left out), so that the process that launches the check
// hands the ranks options, not the file: a node without the shared filesystem could not read it.
struct SectionOption {
  const char* option;
  const char* key;
  std::optional<std::string> (*value)(const doctor::DoctorOptions&);
};
std::optional<std::string> number(double v) {
  return fmt::format("{:g}", v);
}
std::optional<std::string> list(const std::vector<std::string>& items) {
  if (items.empty()) return std::nullopt;
  std::string joined;
  for (const auto& i : items) joined += (joined.empty() ? "" : ",") + i;
  return joined;
}
using Options = doctor::DoctorOptions;
const std::vector<SectionOption> kSectionOptions = {
    {"--shared-dir", "doctor.shared_dir", [](const Options& o) { return std::optional(o.shared_dir); }},
    {"--probe-mb", "doctor.probe_mb",
     [](const Options& o) { return number(static_cast<double>(o.probe_bytes) / 1e6); }},
    {"--min-write-mb-s", "doctor.min_write_mb_s", [](const Options& o) { return number(o.min_write_mb_s); }},
    {"--min-read-mb-s", "doctor.min_read_mb_s", [](const Options& o) { return number(o.min_read_mb_s); }},
    {"--scratch", "doctor.scratch", [](const Options& o) { return std::optional(o.scratch_dir); }},
    {"--textfile-dir", "monitoring.textfile_dir",
     [](const Options& o) { return std::optional(o.textfile_dir); }},
    {"--min-scratch-gib", "doctor.min_scratch_gib",
     [](const Options& o) { return number(o.min_scratch_gib); }},
    {"--expect-env", "doctor.expect_env", [](const Options& o) { return list(o.expect_variables); }},
    {"--expect-provider", "doctor.expect_providers",
     [](const Options& o) { return list(o.expect_providers); }},
    {"--min-busbw-gbps", "doctor.min_busbw_gbps", [](const Options& o) { return number(o.min_busbw_gb_s); }},
    {"--nccl", "doctor.nccl",
     [](const Options& o) { return std::optional<std::string>(o.nccl ? "true" : "false"); }},
    {"--min-nccl-busbw-gbps", "doctor.min_nccl_busbw_gbps",
     [](const Options& o) { return number(o.min_nccl_busbw_gb_s); }},
    {"--manifest", "doctor.manifest", [](const Options& o) { return std::optional(o.manifest); }},
    // A flag, handed on by the callback.
    {"--drain", "doctor.drain", [](const Options&) { return std::optional<std::string>(); }},
};

// --config: the check as the pipeline's doctor stage runs it. Returns the run's folders.
RunLayout apply_pipeline_file(DoctorArgs& a, const CLI::App& sub) {
  for (const auto& row : kSectionOptions) {
    if (sub.get_option(row.option)->count() > 0) {
      throw Error(ExitCode::kUsage, std::string(row.option) + " with --config: the file's " + row.key +
                                        " sets it; change it with --set " + row.key + "=VALUE");
    }
  }
  app::ConfigOptions file;
  file.path = a.config;
  file.sets = a.sets;
  const PipelineConfig config =
      sbatch::with_absolute_paths(file.load(), std::filesystem::current_path().string());
  RunLayout files(config);
  doctor::apply_config(config, a.options);
  a.drain = config.doctor.drain;
  a.mpi = config.slurm.mpi;
  if (a.json.empty()) {
    a.json = files.doctor_report;
    a.forwarded.insert(a.forwarded.end(), {"--json", a.json});
  }
  for (const auto& row : kSectionOptions) {
    if (const auto value = row.value(a.options)) a.forwarded.insert(a.forwarded.end(), {row.option, *value});
  }
  if (a.nodes == 0) a.nodes = config.train.nnodes;
  if (a.gpus_per_node < 0) a.gpus_per_node = config.slurm.gpus ? config.train.num_gpus : 0;
  if (a.partition.empty()) a.partition = config.slurm.partition;
  return files;
}

// What rank 0 prints and writes: the table, doctor.json, and the drain lines (run with --drain).
void publish(const DoctorArgs& a, const doctor::DoctorReport& report) {
  std::cout << doctor::format_table(report);
  if (!a.json.empty()) write_file_atomic(a.json, doctor::format_json(report));
  for (const auto& command : doctor::drain_commands(report)) {
    const std::string line = shell_command(command);
    if (!a.drain) {
      std::cout << "drain: " << line << "\n";
      continue;
    }
    const ProcessResult r = run_process(command, "Slurm's client commands");
    std::cout << (r.exit_code == 0 ? "drained: " : "could not drain (" + r.err + "): ") << line << "\n";
  }
  std::cout.flush();
}

// This rank's node's verdict (rank 0: also the allreduce's and NCCL's bus bandwidth) as Prometheus metrics,
// replacing the node's earlier ones: a node's last verdict, which the doctor alert rule reads.
void record_metrics(const doctor::DoctorOptions& o, const MpiWorld& world,
                    const doctor::DoctorReport& report) {
  monitoring::MetricsFile metrics(
      {o.textfile_dir, MonitoringConfig{}.interval_seconds, /*replaces_unfinished=*/true},
      monitoring::labels_from_environment("doctor", world.rank()));
  if (!metrics.enabled() || report.nodes.empty()) return;
  const doctor::NodeReport& node = world.rank() == 0 ? report.nodes.front() : report.nodes.back();
  for (const auto& check : node.checks) metrics.set("pcdino_doctor_check_ok", check.ok ? 1 : 0, check.name);
  metrics.set("pcdino_doctor_node_healthy", node.healthy() ? 1 : 0);
  if (node.fs_write_mb_s > 0) {
    metrics.set("pcdino_doctor_shared_fs_write_bytes_per_second", node.fs_write_mb_s * 1e6);
    metrics.set("pcdino_doctor_shared_fs_read_bytes_per_second", node.fs_read_mb_s * 1e6);
  }
  if (world.rank() == 0 && !report.allreduce.empty())
    metrics.set("pcdino_doctor_allreduce_busbw_bytes_per_second", report.allreduce.back().busbw_gb_s * 1e9);
  if (world.rank() == 0 && !report.nccl.empty())
    metrics.set("pcdino_doctor_nccl_busbw_bytes_per_second", report.nccl.back().busbw_gb_s * 1e9);
}

// The check itself: this process is one rank of `srun --ntasks-per-node=1 --mpi=pmix pcdino doctor`.
void run_ranks(DoctorArgs& a) {
  // MPI_Init waits for every task of the step: a node stopped before it joins would hang it for good.
  std::atomic<bool> started{false};
  std::thread startup([&started, limit = a.options.answer_seconds] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
    while (!started.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (started.load()) return;
    const char* node = std::getenv("SLURMD_NODENAME");
    std::cerr << fmt::format(
        "pcdino doctor: MPI did not start within {:g} s on {}: a node of the step did not "
        "join (stopped, hung or dead); the nodes that printed this line are not it\n",
        limit, node ? node : "this node");
    std::_Exit(to_int(ExitCode::kFailure));
  });
  const MpiWorld world;
  started.store(true);
  startup.join();
  init_logging(world.rank(), world.size());
  const doctor::DoctorReport report =
      doctor::run_doctor(a.options, world, [&a](const doctor::DoctorReport& r) {
        publish(a, r);
        std::cerr << "error: pcdino doctor: " << doctor::summary(r) << std::endl;
      });
  record_metrics(a.options, world, report);
  if (world.rank() != 0) return;
  publish(a, report);
  if (report.healthy()) return;
  // The line `pcdino status` shows for a failed doctor stage (the table went to stdout).
  const std::string why = "pcdino doctor: " + doctor::summary(report);
  const bool all_answered = std::all_of(report.nodes.begin(), report.nodes.end(),
                                        [](const doctor::NodeReport& n) { return n.answered; });
  if (!all_answered) {  // a stopped rank never finalizes
    std::cerr << "error: " << why << std::endl;
    world.abort(to_int(ExitCode::kFailure));
  }
  throw Error(ExitCode::kFailure, why);
}

// The step that runs the check: one task per node of the allocation, this program with the options given.
std::vector<std::string> step_command(const DoctorArgs& a) {
  std::vector<std::string> command = {
      "srun", "--ntasks-per-node=1", "--mpi=" + a.mpi, "--kill-on-bad-exit=1", own_program(), "doctor"};
  command.insert(command.end(), a.forwarded.begin(), a.forwarded.end());
  return command;
}

// In an allocation (a batch script, salloc) but not in a step: the check becomes a step of every node.
[[noreturn]] void run_as_step(const DoctorArgs& a) {
  const auto command = step_command(a);
  std::vector<char*> argv;
  for (const auto& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw Error(ExitCode::kUnavailable,
              "cannot run srun (Slurm's client commands): " + std::string(std::strerror(errno)));
}

// --submit: the same check as a batch job of one task per node, waited for; its output printed.
void submit(const DoctorArgs& a) {
  const std::string command = shell_command(step_command(a));
  std::vector<std::string> sbatch = {"sbatch",
                                     "--wait",
                                     "--parsable",
                                     "--job-name=pcdino-doctor",
                                     "--nodes=" + std::to_string(a.nodes),
                                     "--ntasks-per-node=1",
                                     "--time=" + a.time,
                                     "--output=" + a.log};
  if (!a.partition.empty()) sbatch.push_back("--partition=" + a.partition);
  // Where Slurm constrains devices, a task sees only the GPUs its job asked for.
  if (a.gpus_per_node > 0) sbatch.push_back("--gpus-per-node=" + std::to_string(a.gpus_per_node));
  sbatch.push_back("--wrap=" + command);
  const ProcessResult r = run_process(sbatch, "Slurm's client commands");
  const std::string job = r.out.substr(0, r.out.find_first_of(";\n"));
  std::string log = a.log;
  if (const auto at = log.find("%j"); at != std::string::npos) log.replace(at, 2, job);
  try {
    std::cout << read_file(log, "the doctor job's output");
  } catch (const Error&) {
    std::cerr << r.err;
  }
  if (r.exit_code != 0) {
    throw Error(ExitCode::kFailure,
                fmt::format("pcdino doctor: job {} ended with exit code {} ({})", job, r.exit_code, log));
  }
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  CLI::App* sub = app.add_subcommand(
      "doctor",
      "Health check of the nodes of an allocation before training, one task per node (in a batch script or "
      "salloc it runs srun itself; --submit --nodes N submits it; --config runs it as a pipeline's doctor "
      "stage); exit 0 when all are healthy");
  doctor::DoctorOptions& o = a->options;
  // Options forwarded to the job's ranks by --submit are registered through `forward`.
  const auto forward = [a](CLI::Option* option) {
    option->each([a, option](const std::string& value) {
      a->forwarded.push_back("--" + option->get_lnames().front());
      a->forwarded.push_back(value);
    });
    return option;
  };
  sub->add_option("-c,--config", a->config,
                  "Pipeline YAML: check as its doctor stage does (its doctor: section; the shared directory "
                  "defaults to the run folder, the report to its logs/doctor.json, --submit's nodes and "
                  "partition to the training's)");
  sub->add_option("--set", a->sets, "With --config: override a key, e.g. --set doctor.min_busbw_gbps=5")
      ->type_name("KEY=VALUE");
  forward(
      sub->add_option("--shared-dir", o.shared_dir, "Shared filesystem to probe on every node (e.g. /fsx)"));
  forward(sub->add_option("--probe-mb", a->probe_mb, "MB each node writes to and reads from it")
              ->capture_default_str()
              ->check(CLI::PositiveNumber));
  forward(sub->add_option("--min-write-mb-s", o.min_write_mb_s, "Floor of its write throughput (MB/s)")
              ->check(CLI::NonNegativeNumber));
  forward(sub->add_option("--min-read-mb-s", o.min_read_mb_s, "Floor of its read throughput (MB/s)")
              ->check(CLI::NonNegativeNumber));
  forward(sub->add_option("--scratch", o.scratch_dir, "Local scratch directory (\"\": not checked)")
              ->capture_default_str());
  forward(sub->add_option("--min-scratch-gib", o.min_scratch_gib, "Free space it needs (GiB)")
              ->capture_default_str()
              ->check(CLI::NonNegativeNumber));
  forward(sub->add_option("--expect-env", o.expect_variables,
                          "Variables every task must have (the SPANK profile's, e.g. FI_PROVIDER); repeat or "
                          "comma-separate")
              ->delimiter(','));
  forward(sub->add_option("--expect-provider", o.expect_providers,
                          "libfabric providers fi_getinfo must report (efa on EFA instance types)")
              ->delimiter(','));
  forward(
      sub->add_option("--textfile-dir", o.textfile_dir,
                      "Each node's verdict as Prometheus metrics in this node-exporter textfile-collector "
                      "directory (absent on a node: none there; \"\": none)")
          ->capture_default_str());
  forward(sub->add_option("--manifest", o.manifest,
                          "Image manifest the nodes' versions must match (absent on a node: not checked; "
                          "\"\": never)")
              ->capture_default_str());
  forward(sub->add_option("--slow-fraction", o.slow_fraction,
                          "A node whose memory bandwidth is below this share of the nodes' median is slow")
              ->capture_default_str()
              ->check(CLI::Range(0.0, 1.0)));
  forward(
      sub->add_option("--min-busbw-gbps", o.min_busbw_gb_s,
                      "Floor of the MPI allreduce bus bandwidth at the largest size (GB/s; 0: not judged)")
          ->check(CLI::NonNegativeNumber));
  forward(sub->add_option("--nccl", o.nccl,
                          "On nodes with NVIDIA devices: check the CUDA runtime and NCCL, and measure NCCL's "
                          "allreduce over every GPU of every node (false: not)")
              ->capture_default_str());
  forward(
      sub->add_option("--min-nccl-busbw-gbps", o.min_nccl_busbw_gb_s,
                      "Floor of the NCCL allreduce bus bandwidth at 1 GiB (GB/s; 0: the published floor of "
                      "the nodes' instance type, from Slurm's node features)")
          ->check(CLI::NonNegativeNumber));
  forward(sub->add_option("--probe-timeout", o.probe_seconds, "Time limit of each probe on a node (s)")
              ->capture_default_str()
              ->check(CLI::PositiveNumber));
  forward(sub->add_option("--answer-timeout", o.answer_seconds,
                          "How long rank 0 waits for the nodes' reports (s)")
              ->capture_default_str()
              ->check(CLI::PositiveNumber));
  forward(sub->add_option("--allreduce-timeout", o.allreduce_seconds, "Time limit of the allreduce sweep (s)")
              ->capture_default_str()
              ->check(CLI::PositiveNumber));
  forward(sub->add_option("--json", a->json, "Write the report as JSON to this file (doctor.json)"));
  sub->add_flag("--drain", a->drain,
                "Run the scontrol drain line of each unhealthy node (needs Slurm admin rights)");
  sub->add_flag("--no-slurm-view", a->no_slurm_view,
                "Do not compare CPUs, memory and GPUs with scontrol show node");
  sub->add_flag("--submit", a->submit,
                "Submit the check as a batch job (sbatch --wait) and print its output");
  sub->add_option("--nodes", a->nodes, "--submit: number of nodes")->check(CLI::PositiveNumber);
  sub->add_option("--partition", a->partition, "--submit: partition");
  sub->add_option("--gpus-per-node", a->gpus_per_node,
                  "--submit: GPUs of each node the check gets (where Slurm constrains devices, the CUDA "
                  "runtime shows a task only those; --config: the training's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--time", a->time, "--submit: the job's time limit")->capture_default_str();
  sub->add_option("--log", a->log, "--submit: the job's output file (%j: job id)")->capture_default_str();
  sub->callback([a, sub] {
    a->options.check_slurm_view = !a->no_slurm_view;
    if (a->no_slurm_view) a->forwarded.push_back("--no-slurm-view");
    a->options.probe_bytes = static_cast<std::size_t>(a->probe_mb * 1e6);
    if (!a->sets.empty() && a->config.empty()) throw Error(ExitCode::kUsage, "--set needs --config");
    std::optional<RunLayout> run;
    if (!a->config.empty()) run = apply_pipeline_file(*a, *sub);
    if (a->drain) a->forwarded.push_back("--drain");
    // A batch script or salloc shell has the job's variables but no step; srun and mpirun ranks have theirs.
    const bool in_allocation = std::getenv("SLURM_JOB_ID") != nullptr;
    const bool in_step =
        std::getenv("SLURM_STEP_ID") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
    // The run folder is made where the check is launched, as `pcdino submit` makes it, never by a rank: a
    // node without the shared filesystem must not pass by making the folder on its own disk.
    if (run && (a->submit || (in_allocation && !in_step))) make_directories(run->logs_dir);
    if (a->submit) {
      if (a->nodes <= 0) throw Error(ExitCode::kUsage, "pcdino doctor --submit needs --nodes N");
      submit(*a);
      return;
    }
    if (in_allocation && !in_step) run_as_step(*a);
    run_ranks(*a);
  });
}

}  // namespace pcdino::cli
