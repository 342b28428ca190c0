// pcdino ami check | generate
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/packer.hpp"
#include "pcdino/ami/spec.hpp"
#include "pcdino/core/error.hpp"

namespace pcdino::cli {

namespace {
struct AmiArgs {
  std::string spec;
  std::string out;
};
}  // namespace

void add_ami_commands(CLI::App& app) {
  CLI::App* ami =
      app.add_subcommand("ami", "Packer manifests for compute-node images with a pinned, compatible stack");
  ami->require_subcommand(1);
  auto args = std::make_shared<AmiArgs>();

  CLI::App* check =
      ami->add_subcommand("check", "Check an image spec's versions against the compatibility table");
  check->add_option("spec", args->spec, "Image spec (YAML)")->required();
  check->callback([args] {
    const ami::ImageSpec spec = ami::load_image_spec(args->spec);
    const auto problems = ami::check_compatibility(spec);
    for (const auto& p : problems) std::cout << "incompatible: " << p.message() << "\n";
    if (!problems.empty())
      throw ConfigError(args->spec + ": " + std::to_string(problems.size()) + " incompatibility(ies)");
    std::cout << args->spec << ": compatible (" << spec.accelerator << " on " << spec.os
              << ", ParallelCluster " << spec.parallelcluster_version << ")\n";
  });

  CLI::App* gen =
      ami->add_subcommand("generate", "Write the Packer templates, scripts, manifest and verify.sh");
  gen->add_option("spec", args->spec, "Image spec (YAML)")->required();
  gen->add_option("-o,--out", args->out, "Output folder")->required();
  gen->callback([args] {
    const auto files = ami::generate_image(ami::load_image_spec(args->spec));
    ami::write_generated(files, args->out);
    std::cout << "wrote " << files.size() << " files to " << args->out
              << "; add the pcdino package (scripts/package) to files/ (see files/README), then: "
                 "packer build "
              << args->out << "/image.pkr.hcl\n";
  });
}

}  // namespace pcdino::cli
