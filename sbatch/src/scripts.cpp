#include "pcdino/sbatch/scripts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"

namespace pcdino::sbatch {

namespace fs = std::filesystem;

namespace {

const std::map<Stage, std::vector<Stage>>& dependencies() {
  static const std::map<Stage, std::vector<Stage>> deps = {
      {"meanstd", {}}, {"train", {"meanstd"}},         {"extract", {"train"}},
      {"labels", {}},  {"knn", {"extract", "labels"}}, {"plots", {"knn"}},
  };
  return deps;
}

std::string summary(const Stage& stage) {
  static const std::map<Stage, std::string> text = {
      {"meanstd", "per-channel mean and std of the dataset"},
      {"train", "DINO pretraining of the ViT"},
      {"extract", "CLS features of the held-out images"},
      {"labels", "class labels of the held-out images"},
      {"knn", "weighted kNN evaluation of the CLS features"},
      {"plots", "UMAP, training curves, kNN plots and index.html"},
  };
  return text.at(stage);
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// The configuration a stage reads, every other key at its default.
std::string stage_inputs(const PipelineConfig& full, const Stage& stage) {
  PipelineConfig c;
  c.meta = full.meta;
  c.meta.output_dir.clear();
  c.meta.name_of_run.clear();
  if (stage == "meanstd") c.train.fraction_for_mean_std_calc = full.train.fraction_for_mean_std_calc;
  if (stage == "train") c.train = full.train;
  if (stage == "extract") c.downstream.compute_cls_features = full.downstream.compute_cls_features;
  if (stage == "knn") c.downstream.knn = full.downstream.knn;
  if (stage == "plots") c.downstream.umap_eval = full.downstream.umap_eval;
  return dump_config(c);
}

// Ranks of an MPI stage on each node: one per GPU, or num_gpus ranks on a CPU-only cluster.
int tasks_per_node(int num_gpus) {
  return std::max(1, num_gpus);
}

}  // namespace

std::vector<Stage> all_stages() {
  return {kPipelineStages.begin(), kPipelineStages.end()};
}

std::vector<Stage> stage_dependencies(const Stage& stage) {
  return dependencies().at(stage);
}

std::vector<Stage> parse_stages(const std::string& list, const std::string& origin) {
  if (list == "all") return all_stages();
  std::set<Stage> wanted;
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (dependencies().count(name) == 0) {
      throw ConfigError(origin + " " + list + ": '" + name +
                        "' is not a stage (meanstd, train, extract, labels, knn, plots or all)");
    }
    wanted.insert(name);
  }
  if (wanted.empty()) throw ConfigError(origin + ": expected a comma-separated list of stages");
  std::vector<Stage> ordered;
  for (const auto& s : all_stages()) {
    if (wanted.count(s) != 0) ordered.push_back(s);
  }
  return ordered;
}

std::map<Stage, std::string> stage_config_hashes(const PipelineConfig& config) {
  std::map<Stage, std::string> hashes;
  for (const auto& stage : all_stages()) {  // submission order: dependencies first
    std::string text = stage + "\n" + stage_inputs(config, stage);
    for (const auto& dep : stage_dependencies(stage)) text += dep + "=" + hashes.at(dep) + "\n";
    hashes[stage] = fmt::format("{:016x}", fnv1a(text));
  }
  return hashes;
}

RunFiles::RunFiles(const PipelineConfig& config)
    : logs_dir((fs::path(config.run_dir()) / "logs").string()),
      config_file((fs::path(logs_dir) / "submitted_pipeline.yaml").string()),
      state_file((fs::path(logs_dir) / "pipeline_jobs.json").string()) {}

std::string RunFiles::script(const Stage& stage) const {
  return (fs::path(logs_dir) / (stage + ".sbatch")).string();
}

std::string RunFiles::marker(const Stage& stage) const {
  return (fs::path(logs_dir) / (stage + ".complete")).string();
}

std::string RunFiles::output(const Stage& stage, const std::string& job, bool error) const {
  return (fs::path(logs_dir) / (stage + (error ? "_err_" : "_out_") + job + (error ? ".err" : ".out")))
      .string();
}

std::string render_script(const PipelineConfig& config, const Stage& stage, const ScriptOptions& options,
                          const std::string& config_hash) {
  const SlurmConfig& s = config.slurm;
  const RunFiles files(config);
  const bool gpu_stage = stage == "train" || stage == "extract";
  std::ostringstream o;
  o << "#!/bin/bash\n";
  o << "# pcdino pipeline '" << config.meta.name_of_run << "', stage " << stage << ": " << summary(stage)
    << ".\n";
  o << "# Written by `pcdino submit` (rewritten by `pcdino resume`); configuration hash " << config_hash
    << ".\n";
  const auto sbatch = [&o](const std::string& option) { o << "#SBATCH " << option << "\n"; };
  sbatch("--job-name=" + config.meta.name_of_run + "-" + stage);
  sbatch("--output=" + files.output(stage, "%j", false));
  sbatch("--error=" + files.output(stage, "%j", true));
  sbatch("--open-mode=append");
  sbatch("--chdir=" + config.run_dir());
  if (stage == "train") {
    sbatch("--nodes=" + std::to_string(config.train.nnodes));
    sbatch("--ntasks-per-node=" + std::to_string(tasks_per_node(config.train.num_gpus)));
    if (s.gpus && config.train.num_gpus > 0)
      sbatch("--gpus-per-node=" + std::to_string(config.train.num_gpus));
  } else if (stage == "extract") {
    const int gpus = config.downstream.compute_cls_features.num_gpus;
    sbatch("--nodes=1");
    sbatch("--ntasks-per-node=" + std::to_string(tasks_per_node(gpus)));
    if (s.gpus && gpus > 0) sbatch("--gpus-per-node=" + std::to_string(gpus));
  } else if (stage == "meanstd") {
    sbatch("--ntasks=" + std::to_string(s.cpu_tasks));  // ranks spread over as many nodes as they need
  } else {
    sbatch("--nodes=1");
    sbatch("--ntasks=1");
  }
  if (s.cpus_per_task > 0) sbatch("--cpus-per-task=" + std::to_string(s.cpus_per_task));
  if (!s.mem.empty()) sbatch("--mem=" + s.mem);
  if (const auto t = s.time_limit.find(stage); t != s.time_limit.end()) sbatch("--time=" + t->second);
  if (!s.partition.empty()) sbatch("--partition=" + s.partition);
  if (!s.account.empty()) sbatch("--account=" + s.account);
  if (!s.qos.empty()) sbatch("--qos=" + s.qos);
  if (!s.constraint.empty()) sbatch("--constraint=" + s.constraint);
  if (gpu_stage && s.exclusive) sbatch("--exclusive");
  const bool requeue = stage == "train" && s.requeue;
  if (requeue) {
    sbatch("--requeue");
    if (s.signal_seconds > 0) sbatch("--signal=USR1@" + std::to_string(s.signal_seconds));
  } else {
    sbatch("--no-requeue");
  }

  o << "\nset -uo pipefail\n";
  const std::string marker = shell_quote(files.marker(stage));
  o << "rm -f " << marker << "  # this stage is complete again only when this job succeeds\n";
  o << "started=$(date +%s)\n";
  o << "echo \"pcdino: stage " << stage << ", job ${SLURM_JOB_ID} (start $((${SLURM_RESTART_COUNT:-0} + 1)))"
    << " on ${SLURM_JOB_NODELIST} at $(date -Is)\" >&2\n";

  if (gpu_stage && !s.environment.empty()) {
    o << "\n# The accelerator environment: spank_pcdino.so sets it in every task when the cluster loads it;\n"
         "# otherwise these exports, which srun hands on to the tasks.\n";
    o << "plugstack=$(scontrol show config 2>/dev/null | sed -n 's/^PlugStackConfig *= *//p')\n";
    o << "if grep -qs spank_pcdino \"${plugstack:-/etc/slurm/plugstack.conf}\" "
         "\"${plugstack:-/etc/slurm/plugstack.conf}.d\"/*; then\n";
    o << "  echo \"pcdino: accelerator environment from spank_pcdino.so\" >&2\nelse\n";
    for (const auto& [name, value] : s.environment)
      o << "  export " << name << "=" << shell_quote(value) << "\n";
    o << "fi\n";
  }

  std::string launch;
  if (s.launcher == "mpirun") {
    launch = "mpirun --bind-to none";
  } else {
    launch = "srun --mpi=" + s.mpi + " --kill-on-bad-exit=1";
  }
  std::string command = launch + " " + shell_quote(options.pcdino) + " " + stage + " --config " +
                        shell_quote(files.config_file);
  const bool threaded = stage == "meanstd" || stage == "train" || stage == "extract" || stage == "knn";
  if (threaded && s.cpus_per_task > 0) command += " --threads " + std::to_string(s.cpus_per_task);
  o << "\n" << command << "\n";
  o << "rc=$?\n";
  if (requeue) {
    o << "if [ \"$rc\" -eq 75 ]; then\n"
         "  # The trainer checkpointed on SIGUSR1 (time limit) or SIGTERM (preemption): back into the "
         "queue;\n"
         "  # the next start resumes from checkpoint.pth.\n"
         "  echo \"pcdino: training stopped after a checkpoint; requeueing job ${SLURM_JOB_ID}\" >&2\n"
         "  scontrol requeue \"${SLURM_JOB_ID}\"\n"
         "  exit 75\n"
         "fi\n";
  }
  o << "if [ \"$rc\" -ne 0 ]; then\n"
       "  echo \"pcdino: stage "
    << stage
    << " failed with exit code $rc\" >&2\n"
       "  exit \"$rc\"\n"
       "fi\n";
  o << "printf '{\"stage\": \"" << stage << "\", \"config_hash\": \"" << config_hash
    << "\", \"job_id\": \"%s\", \"finished\": \"%s\", \"seconds\": %d}\\n' \\\n"
       "  \"${SLURM_JOB_ID}\" \"$(date -Is)\" \"$(($(date +%s) - started))\" >"
    << marker << ".tmp && mv -f " << marker << ".tmp " << marker << "\n";
  return o.str();
}

std::vector<PlannedJob> plan_jobs(const std::vector<Stage>& selected, const std::set<Stage>& complete) {
  const std::vector<Stage> stages = selected.empty() ? all_stages() : selected;
  std::set<Stage> submitted;
  std::vector<PlannedJob> jobs;
  for (const auto& stage : all_stages()) {
    if (std::find(stages.begin(), stages.end(), stage) == stages.end()) continue;
    PlannedJob job{stage, {}};
    for (const auto& dep : stage_dependencies(stage)) {
      if (submitted.count(dep) != 0) job.after.push_back(dep);
    }
    if (complete.count(stage) != 0 && job.after.empty()) continue;
    submitted.insert(stage);
    jobs.push_back(job);
  }
  return jobs;
}

std::vector<std::string> sbatch_arguments(const PlannedJob& job,
                                          const std::map<Stage, std::string>& job_ids) {
  std::vector<std::string> args = {"sbatch", "--parsable"};
  if (!job.after.empty()) {
    std::string dependency = "--dependency=afterok";
    for (const auto& dep : job.after) dependency += ":" + job_ids.at(dep);
    args.push_back(dependency);
    args.push_back("--kill-on-invalid-dep=yes");  // a failed stage cancels its dependents
  }
  return args;
}

}  // namespace pcdino::sbatch
