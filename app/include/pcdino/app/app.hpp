// The application layer every pcdino program's main is built on: the options every stage shares
// (--config pipeline.yaml and overrides of its keys), the exit-code contract, and the runner of an MPI
// stage (configuration before MPI, one error policy on every rank).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino {
class MpiWorld;
}

namespace pcdino::app {

/// --config plus the overrides: --set KEY.PATH=VALUE (any key, repeatable) and the named shortcuts
/// --dataset-dir, --output-dir, --name-of-run, --seed.
struct ConfigOptions {
  std::string path;
  std::vector<std::string> sets;
  std::string dataset_dir, output_dir, name_of_run, seed;

  /// Loads the file with the overrides applied (named shortcuts first, then --set in order).
  PipelineConfig load() const;
};

/// Registers the options of `opts` on `sub`; --config is required when `required` is true, and may also
/// be given as the first positional argument when `positional` is true (`pcdino submit pipeline.yaml`).
void add_config_options(CLI::App* sub, ConfigOptions& opts, bool required = true, bool positional = false);

/// Number of decoding threads for one rank: `requested` if > 0; else the CPUs this process is bound to
/// when the launcher bound it; else this node's cores divided among its `local_ranks`; at least 1.
int default_threads(int requested, int local_ranks);

/// The manifest pcdino's container images carry (scripts/container-image, container/Dockerfile):
/// key=value lines (name, base, pcdino, built).
inline constexpr const char* kContainerImageManifest = "/etc/pcdino/image.txt";

/// The manifest's lines joined with ", " ("name=pcdino-cpu, base=..., pcdino=0.1.0, ..."); "" where the
/// file is absent (not in a container image).
std::string container_image_line(const std::string& manifest);

/// The exit-code contract of every pcdino program: initialises logging, parses `argv` with `app` (its
/// callbacks run inside), logs the container image's manifest when run inside one, then runs `after_parse`
/// if given and returns its code. --help/--version -> 0;
/// command-line errors -> 64 (with CLI11's message); pcdino::Error -> its code; any other exception -> 70;
/// each error printed to stderr.
int run_command_line(CLI::App& app, int argc, char** argv, const std::function<int()>& after_parse = nullptr);

/// Runs one rank's part of an MPI stage. With one rank, errors propagate (run_command_line() maps them to
/// exit codes). With several, a rank that fails may leave the others waiting in a collective, so it logs
/// the error and ends the whole job with MPI_Abort and the error's exit code (70 for other exceptions).
void run_on_every_rank(const MpiWorld& world, const std::function<void()>& stage);

/// The body of every MPI stage's command: loads the configuration of `options` before MPI starts (a bad
/// file fails on every rank alike, with its file:line), starts MPI, logs with this rank's prefix, and runs
/// `stage(config, world)` on every rank under run_on_every_rank(). Throws what loading the configuration
/// throws (ConfigError, exit 78) and, with one rank, what `stage` throws.
void run_mpi_stage(const ConfigOptions& options,
                   const std::function<void(const PipelineConfig&, const MpiWorld&)>& stage);

}  // namespace pcdino::app
