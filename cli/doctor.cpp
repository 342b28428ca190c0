// pcdino doctor: the health check of an allocation's nodes, one MPI rank per node (issue #21).
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/doctor/launch.hpp"
#include "pcdino/sbatch/submitter.hpp"

namespace pcdino::cli {

namespace {

struct DoctorArgs {
  doctor::DoctorOptions options;
  doctor::LaunchOptions launch;
  std::string config;             // --config: the settings of a pipeline file's doctor: section
  std::vector<std::string> sets;  // --set overrides of its keys
  double probe_mb = DoctorConfig{}.probe_mb;
  bool no_slurm_view = false;
};

// --config: the check as the pipeline's doctor stage runs it; the file sets what its section shares with
// the command line (--set changes it there).
void apply_pipeline_file(DoctorArgs& a, const CLI::App& sub) {
  for (const auto& row : doctor::section_options()) {
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
  doctor::apply_pipeline(config, a.options, a.launch);
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
      a->launch.forwarded.push_back("--" + option->get_lnames().front());
      a->launch.forwarded.push_back(value);
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
  forward(sub->add_option("--json", a->launch.json, "Write the report as JSON to this file (doctor.json)"));
  sub->add_flag("--drain", a->launch.drain,
                "Run the scontrol drain line of each unhealthy node (needs Slurm admin rights)");
  sub->add_flag("--no-slurm-view", a->no_slurm_view,
                "Do not compare CPUs, memory and GPUs with scontrol show node");
  sub->add_flag("--submit", a->launch.submit,
                "Submit the check as a batch job (sbatch --wait) and print its output");
  sub->add_option("--nodes", a->launch.nodes, "--submit: number of nodes")->check(CLI::PositiveNumber);
  sub->add_option("--partition", a->launch.partition, "--submit: partition");
  sub->add_option("--gpus-per-node", a->launch.gpus_per_node,
                  "--submit: GPUs of each node the check gets (where Slurm constrains devices, the CUDA "
                  "runtime shows a task only those; --config: the training's)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--time", a->launch.time, "--submit: the job's time limit")->capture_default_str();
  sub->add_option("--log", a->launch.log, "--submit: the job's output file (%j: job id)")
      ->capture_default_str();
  sub->callback([a, sub] {
    a->options.check_slurm_view = !a->no_slurm_view;
    if (a->no_slurm_view) a->launch.forwarded.push_back("--no-slurm-view");
    a->options.probe_bytes = static_cast<std::size_t>(a->probe_mb * 1e6);
    if (!a->sets.empty() && a->config.empty()) throw Error(ExitCode::kUsage, "--set needs --config");
    if (!a->config.empty()) apply_pipeline_file(*a, *sub);
    if (a->launch.drain) a->launch.forwarded.push_back("--drain");
    a->launch.program = own_program;
    doctor::run_check(a->options, a->launch);
  });
}

}  // namespace pcdino::cli
