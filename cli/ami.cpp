// pcdino ami check | generate | check-plugin
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/packer.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/doctor/doctor.hpp"
#include "pcdino/spank/plugin_file.hpp"

namespace pcdino::cli {

namespace {
struct AmiArgs {
  std::string spec;
  std::string out;
  std::string plugin;
  std::string slurm;
  std::string parallelcluster;
};
}  // namespace

void add_ami_commands(CLI::App& app) {
  CLI::App* ami =
      app.add_subcommand("ami", "Packer manifests for compute-node images with a pinned, compatible stack");
  ami->require_subcommand(1);
  auto args = std::make_shared<AmiArgs>();

  CLI::App* check = ami->add_subcommand(
      "check",
      "Check an image spec's versions against the compatibility table (exit 78 naming each incompatible "
      "pair); an OS past its vendor's end of support is a warning");
  check->add_option("spec", args->spec, "Image spec (YAML)")->required();
  check->callback([args] {
    const ami::ImageSpec spec = ami::load_image_spec(args->spec);
    const auto problems = ami::check_compatibility(spec);
    for (const auto& p : problems) std::cout << "incompatible: " << p.message() << "\n";
    if (!problems.empty())
      throw ConfigError(args->spec + ": " + std::to_string(problems.size()) + " incompatibility(ies)");
    std::cout << args->spec << ": compatible (" << spec.accelerator << " on " << spec.os
              << ", ParallelCluster " << spec.parallelcluster_version << ")\n";
    if (const std::string note = parallelcluster::os_support_note(spec.parallelcluster_version, spec.os);
        !note.empty())
      std::cout << "note: " << note << "\n";
    // A warning, not a refusal: an image for an old cluster may still be needed (ami/examples/workshop.yaml).
    if (const std::string eos =
            parallelcluster::end_of_support_note(spec.os, parallelcluster::utc_date_today());
        !eos.empty())
      std::cout << "warning: base.os: " << eos << "\n";
  });

  CLI::App* gen =
      ami->add_subcommand("generate", "Write the Packer templates, scripts, manifest and verify.sh");
  gen->add_option("spec", args->spec, "Image spec (YAML)")->required();
  gen->add_option("-o,--out", args->out, "Output folder")->required();
  gen->callback([args] {
    const ami::ImageSpec spec = ami::load_image_spec(args->spec);
    const auto files = ami::generate_image(spec);
    ami::write_generated(files, args->out);
    // Packer >= 1.7 installs the amazon plugin (plugins.pkr.hcl) with `packer init`; the template's two
    // variables are the region (the spec's, its default) and the subnet of the build instance.
    std::cout << "wrote " << files.size() << " files to " << args->out << "; add "
              << (spec.pcdino_from == "source" ? "pcdino's source (scripts/package --source)"
                                               : "the pcdino package (scripts/package)")
              << " to files/ (see files/README), then (Packer >= 1.7):\n"
              << "  cd " << args->out
              << " && packer init . && packer validate . && packer build -var region=" << spec.region
              << " -var subnet_id=SUBNET_ID .\n"
              << "SUBNET_ID: a subnet in " << spec.region
              << " with a route to the internet that Packer reaches by SSH (without -var subnet_id, the "
                 "region's default VPC)\n";
  });

  CLI::App* plugin = ami->add_subcommand(
      "check-plugin",
      "Whether a built SPANK plugin loads in this node's Slurm: its plugin_version (read from the file) "
      "against `scontrol --version`; exit 78 naming both versions when their major.minor differ (verify.sh)");
  plugin->add_option("plugin", args->plugin, "The plugin (spank_pcdino.so)")->required();
  CLI::Option* slurm_option = plugin->add_option(
      "--slurm", args->slurm, "Judge against this Slurm version instead of srun's (25.11.8)");
  plugin
      ->add_option("--parallelcluster", args->parallelcluster,
                   "Judge against the Slurm of this ParallelCluster release's AMIs (3.16.3)")
      ->excludes(slurm_option);
  plugin->callback([args] {
    spank::SlurmVersion built, slurm;
    try {
      built = spank::plugin_slurm_version(args->plugin);
    } catch (const std::runtime_error& e) {
      throw DataError(e.what());
    }
    std::string wanted = args->slurm;
    if (!args->parallelcluster.empty()) {
      const parallelcluster::Release* release = parallelcluster::find_release(args->parallelcluster);
      if (release == nullptr || *release->slurm == '\0')
        throw ConfigError("check-plugin: --parallelcluster " + args->parallelcluster +
                          (release == nullptr
                               ? ": not a release pcdino knows (newest: " +
                                     std::string(parallelcluster::newest_release().release) + ")"
                               : ": its Slurm is unknown (" + release->source + ")"));
      wanted = release->slurm;
    }
    try {
      slurm = wanted.empty() ? doctor::running_slurm_version() : spank::SlurmVersion::parse(wanted);
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string("check-plugin: ") + e.what());
    }
    const doctor::Check verdict = doctor::judge_spank_plugin(args->plugin, built, slurm);
    const std::string release =
        args->parallelcluster.empty() ? "" : " (ParallelCluster " + args->parallelcluster + "'s AMIs)";
    if (!verdict.ok) throw ConfigError(verdict.detail + release);
    std::cout << verdict.detail << "\n";
  });
}

}  // namespace pcdino::cli
