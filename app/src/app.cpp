#include "pcdino/app/app.hpp"

#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/log.hpp"
#include "pcdino/core/mpi_world.hpp"

namespace pcdino::app {

PipelineConfig ConfigOptions::load() const {
  std::vector<ConfigOverride> overrides;
  if (!dataset_dir.empty())
    overrides.push_back({"meta.dataset_dir", dataset_dir, "--dataset-dir " + dataset_dir, true});
  if (!output_dir.empty())
    overrides.push_back({"meta.output_dir", output_dir, "--output-dir " + output_dir, true});
  if (!name_of_run.empty())
    overrides.push_back({"meta.name_of_run", name_of_run, "--name-of-run " + name_of_run, true});
  if (!seed.empty()) overrides.push_back({"meta.seed", seed, "--seed " + seed, false});
  for (const auto& s : sets) overrides.push_back(parse_override(s));
  if (path.empty()) return parse_config("", "(no --config)", overrides);
  return load_config(path, overrides);
}

void add_config_options(CLI::App* sub, ConfigOptions& opts, bool required, bool positional) {
  auto* config = sub->add_option(positional ? "config,-c,--config" : "-c,--config", opts.path,
                                 "Pipeline YAML (the keys of scDINO_full_pipeline.yaml)");
  if (required) config->required();
  sub->add_option("--set", opts.sets, "Override any key: --set train_scDINO.epochs=5 (repeatable)")
      ->type_name("KEY=VALUE");
  sub->add_option("--dataset-dir", opts.dataset_dir, "Override meta.dataset_dir");
  sub->add_option("--output-dir", opts.output_dir, "Override meta.output_dir");
  sub->add_option("--name-of-run", opts.name_of_run, "Override meta.name_of_run");
  sub->add_option("--seed", opts.seed, "Override meta.seed");
}

std::string container_image_line(const std::string& manifest) {
  std::ifstream in(manifest);
  if (!in) return "";
  std::string line, text;
  while (std::getline(in, line)) {
    if (!line.empty()) text += (text.empty() ? "" : ", ") + line;
  }
  return text;
}

int run_command_line(CLI::App& app, int argc, char** argv, const std::function<int()>& after_parse) {
  try {
    init_logging(0, 1);
    // Inside one of pcdino's container images: which one, in every stage's log (before parsing: a
    // subcommand's callback runs the stage inside it), not in --help's or --version's output.
    const bool asks_help = std::any_of(argv + 1, argv + argc, [](const char* a) {
      const std::string s(a);
      return s == "-h" || s == "--help" || s == "--version";
    });
    // Once per step: `pcdino train` execs pcdino-train, which inherits the mark.
    if (const std::string image = container_image_line(kContainerImageManifest);
        !image.empty() && !asks_help && std::getenv("PCDINO_IMAGE_LOGGED") == nullptr) {
      spdlog::info("in container image: {}", image);
      ::setenv("PCDINO_IMAGE_LOGGED", "1", 1);
    }
    app.parse(argc, argv);
    return after_parse ? after_parse() : to_int(ExitCode::kOk);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message and the relevant help
    return to_int(ExitCode::kUsage);
  } catch (const Error& e) {
    std::cerr << "error: " << e.what() << '\n';
    return to_int(e.code());
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << '\n';
    return to_int(ExitCode::kSoftware);
  }
}

int default_threads(int requested, int local_ranks) {
  if (requested > 0) return requested;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  // A launcher that binds ranks (mpirun binds to a core by default, srun with --cpu-bind) has already
  // decided how many CPUs this rank gets; more threads than that only contend.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) < cores) {
    return std::max(1, CPU_COUNT(&allowed));
  }
  return std::max(1, cores / std::max(1, local_ranks));
}

void run_on_every_rank(const MpiWorld& world, const std::function<void()>& stage) {
  try {
    stage();
  } catch (const Error& e) {
    if (world.size() == 1) throw;
    spdlog::error("{}", e.what());
    world.abort(to_int(e.code()));
  } catch (const std::exception& e) {
    if (world.size() == 1) throw;
    spdlog::error("internal error: {}", e.what());
    world.abort(to_int(ExitCode::kSoftware));
  }
}

void run_mpi_stage(const ConfigOptions& options,
                   const std::function<void(const PipelineConfig&, const MpiWorld&)>& stage) {
  const PipelineConfig config = options.load();
  MpiWorld world;
  init_logging(world.rank(), world.size());
  run_on_every_rank(world, [&] { stage(config, world); });
}

}  // namespace pcdino::app
