// `pcdino submit|resume|status|logs|cancel`: the pipeline as a Slurm dependency chain (sbatch/).
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/stages.hpp"
#include "pcdino/sbatch/submitter.hpp"

namespace pcdino::cli {

namespace {

struct PipelineArgs {
  app::ConfigOptions config;
  std::string stages = "all";
  std::string program;
  bool dry_run = false;
  std::string stage;
  int lines = 40;
  std::string stream = "both";

  // The configuration with absolute paths, as the jobs see it.
  PipelineConfig load() const {
    return sbatch::with_absolute_paths(config.load(), std::filesystem::current_path().string());
  }
};

void add_submit(CLI::App& app, const std::string& name, bool resume) {
  auto args = std::make_shared<PipelineArgs>();
  CLI::App* sub = app.add_subcommand(
      name, resume ? "Resubmit a pipeline from its first incomplete stage: stages whose completion marker "
                     "matches the configuration are skipped, everything after a resubmitted stage runs again"
                   : "Submit the whole pipeline (mean/std, train, CLS features, labels, kNN, plots; with "
                     "doctor.enabled the node check before training) as Slurm jobs chained with "
                     "--dependency=afterok");
  app::add_config_options(sub, args->config, true, true);
  sub->add_option("--stages", args->stages, "Comma-separated stages to submit: " + stage_names() + ", or all")
      ->capture_default_str();
  sub->add_flag("--dry-run", args->dry_run, "Print the batch scripts and sbatch commands; submit nothing");
  sub->add_option("--program", args->program,
                  "The pcdino program the scripts run on the compute nodes (default: this one)");
  sub->footer(
      "Scripts, the submitted configuration and pipeline_jobs.json go to {output_dir}/{name_of_run}/logs/.\n"
      "Exit codes: 0 submitted, 64 usage, 66 missing input, 69 no sbatch, 73 logs folder not writable,\n"
      "75 jobs of this run still queued or running, 78 bad configuration.");
  sub->callback([args, resume] {
    const PipelineConfig config = args->load();
    sbatch::SubmitOptions options;
    // "all": the stages this configuration turns on (the doctor check only with doctor.enabled).
    if (args->stages != "all") options.stages = sbatch::parse_stages(args->stages, "--stages");
    options.resume = resume;
    options.dry_run = args->dry_run;
    options.pcdino = args->program.empty() ? own_program() : args->program;
    const auto report = sbatch::submit_pipeline(config, options, std::cout);
    if (resume && report.jobs.empty()) std::cout << "every selected stage is complete; nothing submitted\n";
  });
}

}  // namespace

void add_pipeline_commands(CLI::App& app) {
  add_submit(app, "submit", false);

  auto status = std::make_shared<PipelineArgs>();
  CLI::App* st = app.add_subcommand("status", "State of a submitted pipeline's jobs, stage by stage");
  app::add_config_options(st, status->config, true, true);
  st->footer("Exit codes: 0 no stage failed, 1 a stage failed or was cancelled, 66 never submitted.");
  st->callback([status] {
    if (!sbatch::print_status(status->load(), std::cout))
      throw Error(ExitCode::kFailure, "a stage of this run failed or was cancelled");
  });

  auto logs = std::make_shared<PipelineArgs>();
  CLI::App* lg = app.add_subcommand("logs", "Tail of one stage's job output ({stage}_out_*.out, _err_*.err)");
  app::add_config_options(lg, logs->config, true, true);
  lg->add_option("stage", logs->stage, "One of " + stage_names())->required();
  lg->add_option("-n,--lines", logs->lines, "Lines from the end of each file")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  lg->add_option("--stream", logs->stream, "out, err or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"out", "err", "both"}));
  lg->callback(
      [logs] { sbatch::print_logs(logs->load(), logs->stage, logs->lines, logs->stream, std::cout); });

  auto cancel = std::make_shared<PipelineArgs>();
  CLI::App* cn = app.add_subcommand("cancel", "Cancel a submitted pipeline's queued and running jobs");
  app::add_config_options(cn, cancel->config, true, true);
  cn->callback([cancel] {
    const auto cancelled = sbatch::cancel_pipeline(cancel->load());
    if (cancelled.empty()) std::cout << "no job of this run is queued or running\n";
    for (const auto& c : cancelled) std::cout << "cancelled " << c << "\n";
  });

  add_submit(app, "resume", true);
}

}  // namespace pcdino::cli
