// pcdino cluster generate | validate | cost | keys
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/cluster/containers.hpp"
#include "pcdino/cluster/cost.hpp"
#include "pcdino/cluster/generate.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::cli {

namespace {

struct ClusterArgs {
  std::string input, out, pipeline, queue, release;
  bool allow_ssh_from_anywhere = false, strict = false, template_placeholders = false;
  long long images = 0;
  double images_per_second = 0;
};

// Prints the findings, errors first, and returns the summary line's text; errors (and policy findings with
// --strict) make the command fail with exit code 78 (EX_CONFIG), `refused` added to the message.
std::string judge(std::vector<cluster::Finding> findings, const std::string& what, const std::string& release,
                  bool strict, const std::string& refused = "") {
  std::stable_sort(findings.begin(), findings.end(),
                   [](const auto& a, const auto& b) { return a.severity < b.severity; });
  std::map<cluster::Severity, int> count;
  for (const auto& f : findings) {
    std::cout << f.str() << "\n";
    ++count[f.severity];
  }
  const int errors = count[cluster::Severity::error], policy = count[cluster::Severity::policy];
  const std::string summary = std::to_string(errors) + " error(s), " + std::to_string(policy) + " policy, " +
                              std::to_string(count[cluster::Severity::warning]) + " warning(s) (" +
                              cluster::schema_basis(release) + ")";
  std::cout.flush();  // the findings before the summary, also where stdout and stderr meet
  if (errors > 0 || (strict && policy > 0))
    throw ConfigError(what + ": " + summary + (errors == 0 ? "; policy findings fail with --strict" : "") +
                      refused);
  return what + ": " + summary;
}

void report(std::vector<cluster::Finding> findings, const std::string& what, const std::string& release,
            bool strict) {
  std::cout << judge(std::move(findings), what, release, strict) << "\n";
}

}  // namespace

void add_cluster_commands(CLI::App& app) {
  CLI::App* cluster = app.add_subcommand(
      "cluster", "AWS ParallelCluster v3 config and VPC stack from a site spec, validated offline");
  cluster->require_subcommand(1);
  auto args = std::make_shared<ClusterArgs>();

  CLI::App* gen = cluster->add_subcommand(
      "generate",
      "Validate, then write cluster-config.yaml, network.yaml (CloudFormation), commands.sh, teardown.sh "
      "(and head-node.sh and compute-node.sh for the sections that need them). A refused configuration "
      "(exit 78: errors, or policy findings with --strict) writes nothing: an existing output folder keeps "
      "its last accepted run's files. An accepted one replaces the generated files there (and removes those "
      "it no longer makes), leaving any other file");
  gen->add_option("site", args->input, "Site spec (YAML)")->required();
  gen->add_option("-o,--out", args->out, "Output folder")->required();
  gen->add_option("--pipeline", args->pipeline,
                  "Pipeline YAML whose stages must fit the queue they run on: --queue, else the pipeline's "
                  "slurm.partition, else the first queue (Slurm's default partition)");
  gen->add_option("--queue", args->queue,
                  "Queue the pipeline runs on (default: slurm.partition, else the first)");
  gen->add_flag(
      "--strict", args->strict,
      "Fail on pcdino's policy findings too (SSH CIDR, IMDSv2, subnets, an OS past its end of support)");
  gen->callback([args] {
    const cluster::SiteSpec site = cluster::load_site_spec(args->input);
    if (!site.ami_spec.empty()) {
      const ami::ImageSpec image = ami::load_image_spec(site.ami_spec);
      cluster::check_image_spec(site, image.parallelcluster_version, image.os, image.region, site.ami_spec);
    }
    const cluster::ClusterFiles files = cluster::generate_cluster(site);
    // Judged in memory, before anything is written: a refused configuration leaves no runnable file.
    std::vector<cluster::Finding> findings = cluster::site_findings(site, parallelcluster::utc_date_today());
    // The generated file is a template: commands.sh fills in the ${...} outputs of network.yaml.
    const auto config =
        cluster::validate_cluster_config(files.cluster_config, "cluster-config.yaml",
                                         {site.allow_ssh_from_anywhere, true, site.parallelcluster_version});
    findings.insert(findings.end(), config.begin(), config.end());
    if (!args->pipeline.empty()) {
      const auto fit = cluster::check_pipeline_fit(files.cluster_config, "cluster-config.yaml",
                                                   load_config(args->pipeline), args->queue);
      findings.insert(findings.end(), fit.begin(), fit.end());
    }
    const bool existed = std::filesystem::exists(args->out + "/commands.sh");
    const std::string summary =
        judge(findings, args->out + "/cluster-config.yaml", site.parallelcluster_version, args->strict,
              "; nothing written to " + args->out +
                  (existed ? " (it keeps the files of its last accepted run)" : ""));
    std::string written;
    for (const auto& name : cluster::write_cluster_files(files, args->out))
      written += (written.empty() ? "" : ", ") + name;
    std::cout << "wrote " << written << " to " << args->out << "\n" << summary << "\n";
  });

  CLI::App* val = cluster->add_subcommand(
      "validate",
      "Check a ParallelCluster v3 configuration offline: errors (ParallelCluster would "
      "refuse it, or it would not work), policy (pcdino's advice) and warnings");
  val->add_option("config", args->input, "cluster configuration (YAML)")->required();
  val->add_option("--pipeline", args->pipeline,
                  "Pipeline YAML whose stages must fit the queue they run on: --queue, else the pipeline's "
                  "slurm.partition, else the first queue (Slurm's default partition)");
  val->add_option("--queue", args->queue,
                  "Queue the pipeline runs on (default: slurm.partition, else the first)");
  val->add_flag("--allow-ssh-from-anywhere", args->allow_ssh_from_anywhere,
                "Accept HeadNode.Ssh.AllowedIps 0.0.0.0/0");
  val->add_flag("--strict", args->strict, "Fail on pcdino's policy findings too (SSH CIDR, IMDSv2, subnets)");
  val->add_flag(
      "--template", args->template_placeholders,
      "The file is a template: values written \"${NAME}\" are filled in later (as commands.sh does)");
  val->add_option("--parallelcluster", args->release,
                  "The ParallelCluster release the file is for (default: the newest pcdino knows, " +
                      std::string(parallelcluster::newest_release().release) + ")");
  val->callback([args] {
    const std::string text = read_file(args->input, "cluster configuration");
    const std::string release =
        args->release.empty() ? std::string(parallelcluster::newest_release().release) : args->release;
    if (const std::string why = cluster::release_problem(release); !why.empty())
      throw ConfigError("--parallelcluster: " + why);
    auto findings = cluster::validate_cluster_config(
        text, args->input, {args->allow_ssh_from_anywhere, args->template_placeholders, release});
    if (!args->pipeline.empty()) {
      const auto fit =
          cluster::check_pipeline_fit(text, args->input, load_config(args->pipeline), args->queue);
      findings.insert(findings.end(), fit.begin(), fit.end());
    }
    report(findings, args->input, release, args->strict);
  });

  // The site spec's keys, as `pcdino config --schema` lists the pipeline's: the table parsing walks.
  CLI::App* keys = cluster->add_subcommand("keys", "List the site spec's keys (a Markdown table)");
  keys->callback([] {
    std::cout << "| key | type | default | accepts | what it does |\n|---|---|---|---|---|\n";
    for (const auto& k : cluster::site_keys()) {
      std::cout << "| `" << k.path << "` | " << k.type << " | "
                << (k.required                ? std::string("required")
                    : k.default_value.empty() ? ""
                                              : "`" + k.default_value + "`")
                << " | " << k.accepts << " | " << k.doc << " |\n";
    }
  });

  auto enroot_conf = std::make_shared<std::string>(cluster::kEnrootConf);
  CLI::App* prolog = cluster->add_subcommand(
      "enroot-prolog",
      "Print the Slurm prolog that makes each job's user's own Enroot folders on a node (root's parents, the "
      "user's 0700 folder; one someone else made is moved aside): head-node.sh links it into prolog.d");
  prolog->add_option("--enroot-conf", *enroot_conf, "The enroot.conf it reads on the node")
      ->capture_default_str();
  prolog->callback([enroot_conf] { std::cout << cluster::enroot_folders_prolog(*enroot_conf); });

  CLI::App* cost = cluster->add_subcommand(
      "cost",
      "Hourly cost of a site spec in its region, and what a training run adds (--pipeline, --images and "
      "--images-per-second-per-gpu together); prices it lacks are named");
  cost->add_option("site", args->input, "Site spec (YAML)")->required();
  cost->add_option("--pipeline", args->pipeline, "Pipeline YAML (epochs, nodes, GPUs) for a run estimate");
  cost->add_option("--images", args->images, "Training images per epoch (> 0)");
  cost->add_option("--images-per-second-per-gpu", args->images_per_second,
                   "Measured training throughput per GPU (> 0)");
  cost->callback([args] {
    // A run estimate needs all three; one or two of them alone is a usage error naming what is missing.
    const std::pair<const char*, bool> run_options[] = {
        {"--pipeline", !args->pipeline.empty()},
        {"--images", args->images > 0},
        {"--images-per-second-per-gpu", args->images_per_second > 0}};
    std::string given, missing;
    for (const auto& [name, set] : run_options) {
      std::string& list = set ? given : missing;
      list += (list.empty() ? "" : ", ") + std::string(name);
    }
    if (!given.empty() && !missing.empty())
      throw Error(ExitCode::kUsage,
                  "cluster cost: a run estimate needs --pipeline, --images and "
                  "--images-per-second-per-gpu (each > 0); " +
                      given + " given, " + missing + " missing");
    const cluster::SiteSpec site = cluster::load_site_spec(args->input);
    std::unique_ptr<PipelineConfig> pipeline;
    if (!args->pipeline.empty()) pipeline = std::make_unique<PipelineConfig>(load_config(args->pipeline));
    std::cout << cluster::cost_report(site, pipeline.get(), {args->images, args->images_per_second});
  });
}

}  // namespace pcdino::cli
