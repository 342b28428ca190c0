#include "pcdino/doctor/launch.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/log.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::doctor {

namespace {

// This rank's node's verdict (rank 0: also the allreduce's and NCCL's bus bandwidth) as Prometheus metrics,
// replacing the node's earlier ones: a node's last verdict, which the doctor alert rule reads.
void record_metrics(const DoctorOptions& o, const MpiWorld& world, const DoctorReport& report) {
  monitoring::MetricsFile metrics(
      {o.textfile_dir, MonitoringConfig{}.interval_seconds, /*replaces_unfinished=*/true},
      monitoring::labels_from_environment("doctor", world.rank()));
  if (!metrics.enabled() || report.nodes.empty()) return;
  const NodeReport& node = world.rank() == 0 ? report.nodes.front() : report.nodes.back();
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

// In an allocation (a batch script, salloc) but not in a step: the check becomes a step of every node.
[[noreturn]] void run_as_step(const LaunchOptions& launch) {
  const auto command = step_command(launch);
  std::vector<char*> argv;
  for (const auto& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw Error(ExitCode::kUnavailable,
              "cannot run srun (Slurm's client commands): " + std::string(std::strerror(errno)));
}

}  // namespace

void apply_pipeline(const PipelineConfig& config, DoctorOptions& options, LaunchOptions& launch) {
  const RunLayout files(config);
  apply_config(config, options);
  launch.drain = config.doctor.drain;
  launch.mpi = config.slurm.mpi;
  launch.logs_dir = files.logs_dir;
  if (launch.json.empty()) {
    launch.json = files.doctor_report;
    launch.forwarded.insert(launch.forwarded.end(), {"--json", launch.json});
  }
  const auto section = section_arguments(options);
  launch.forwarded.insert(launch.forwarded.end(), section.begin(), section.end());
  if (launch.nodes == 0) launch.nodes = config.train.nnodes;
  if (launch.gpus_per_node < 0) launch.gpus_per_node = config.slurm.gpus ? config.train.num_gpus : 0;
  if (launch.partition.empty()) launch.partition = config.slurm.partition;
}

std::vector<std::string> step_command(const LaunchOptions& launch) {
  std::vector<std::string> command = {
      "srun",  "--ntasks-per-node=1", "--mpi=" + launch.mpi, "--kill-on-bad-exit=1", launch.program(),
      "doctor"};
  command.insert(command.end(), launch.forwarded.begin(), launch.forwarded.end());
  return command;
}

void run_check(const DoctorOptions& options, const LaunchOptions& launch) {
  // A batch script or salloc shell has the job's variables but no step; srun and mpirun ranks have theirs.
  const bool in_allocation = std::getenv("SLURM_JOB_ID") != nullptr;
  const bool in_step =
      std::getenv("SLURM_STEP_ID") != nullptr || std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
  // The run folder is made where the check is launched, as `pcdino submit` makes it, never by a rank: a
  // node without the shared filesystem must not pass by making the folder on its own disk.
  if (!launch.logs_dir.empty() && (launch.submit || (in_allocation && !in_step)))
    make_directories(launch.logs_dir);
  if (launch.submit) {
    if (launch.nodes <= 0) throw Error(ExitCode::kUsage, "pcdino doctor --submit needs --nodes N");
    submit(launch);
    return;
  }
  if (in_allocation && !in_step) run_as_step(launch);
  run_rank(options, launch);
}

void submit(const LaunchOptions& launch) {
  const std::string command = shell_command(step_command(launch));
  std::vector<std::string> sbatch = {"sbatch",
                                     "--wait",
                                     "--parsable",
                                     "--job-name=pcdino-doctor",
                                     "--nodes=" + std::to_string(launch.nodes),
                                     "--ntasks-per-node=1",
                                     "--time=" + launch.time,
                                     "--output=" + launch.log};
  if (!launch.partition.empty()) sbatch.push_back("--partition=" + launch.partition);
  // Where Slurm constrains devices, a task sees only the GPUs its job asked for.
  if (launch.gpus_per_node > 0) sbatch.push_back("--gpus-per-node=" + std::to_string(launch.gpus_per_node));
  sbatch.push_back("--wrap=" + command);
  const ProcessResult r = run_process(sbatch, "Slurm's client commands");
  const std::string job = r.out.substr(0, r.out.find_first_of(";\n"));
  std::string log = launch.log;
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

void run_rank(const DoctorOptions& options, const LaunchOptions& launch) {
  // MPI_Init waits for every task of the step: a node stopped before it joins would hang it for good.
  std::atomic<bool> started{false};
  std::thread startup([&started, limit = options.answer_seconds] {
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
  const DoctorReport report = run_doctor(options, world, [&launch](const DoctorReport& r) {
    publish(r, launch);
    std::cerr << "error: pcdino doctor: " << summary(r) << std::endl;
  });
  record_metrics(options, world, report);
  if (world.rank() != 0) return;
  publish(report, launch);
  if (report.healthy()) return;
  // The line `pcdino status` shows for a failed doctor stage (the table went to stdout).
  const std::string why = "pcdino doctor: " + summary(report);
  const bool all_answered =
      std::all_of(report.nodes.begin(), report.nodes.end(), [](const NodeReport& n) { return n.answered; });
  if (!all_answered) {  // a stopped rank never finalizes
    std::cerr << "error: " << why << std::endl;
    world.abort(to_int(ExitCode::kFailure));
  }
  throw Error(ExitCode::kFailure, why);
}

void publish(const DoctorReport& report, const LaunchOptions& launch) {
  std::cout << format_table(report);
  if (!launch.json.empty()) write_file_atomic(launch.json, format_json(report));
  for (const auto& command : drain_commands(report)) {
    const std::string line = shell_command(command);
    if (!launch.drain) {
      std::cout << "drain: " << line << "\n";
      continue;
    }
    const ProcessResult r = run_process(command, "Slurm's client commands");
    std::cout << (r.exit_code == 0 ? "drained: " : "could not drain (" + r.err + "): ") << line << "\n";
  }
  std::cout.flush();
}

}  // namespace pcdino::doctor
