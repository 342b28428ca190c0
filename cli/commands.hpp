// Subcommands of the `pcdino` program. Each is a thin layer over its component's library: it declares
// its options with CLI11 and calls the library; all work and all error messages live in the libraries.
#pragma once

#include <CLI/CLI.hpp>

namespace pcdino::cli {

/// Registers a subcommand that runs `program` from pcdino's own folder with the remaining arguments
/// (git-style), for stages that load LibTorch. Missing program: exit code 69.
CLI::App* add_external(CLI::App& parent, const std::string& name, const std::string& program,
                       const std::string& summary, const std::string& issue);

/// `pcdino dataset import|pack` (cli/dataset.cpp).
void add_dataset_commands(CLI::App& app);

/// `pcdino meanstd` (cli/meanstd.cpp).
void add_meanstd_command(CLI::App& app);

/// `pcdino doctor` (cli/doctor.cpp).
void add_doctor_command(CLI::App& app);

/// `pcdino node-check` (cli/node_check.cpp).
void add_node_check_command(CLI::App& app);

/// `pcdino ami check|generate` (cli/ami.cpp).
void add_ami_commands(CLI::App& app);

/// `pcdino labels` and `pcdino knn` (downstream.cpp).
void add_downstream_commands(CLI::App& app);

/// `pcdino cluster generate|validate|cost` (cli/cluster.cpp).
void add_cluster_commands(CLI::App& app);

/// `pcdino submit|resume|status|logs|cancel` (cli/pipeline.cpp).
void add_pipeline_commands(CLI::App& app);

/// `pcdino config [FILE] [--schema]` (cli/config.cpp).
void add_config_command(CLI::App& app);

/// `pcdino metrics`: the metric table (monitoring::metrics_markdown()).
void add_metrics_command(CLI::App& app);

/// `pcdino exit-codes`: the exit-code table (pcdino/core/error.hpp exit_codes()) as Markdown.
void add_exit_codes_command(CLI::App& app);

/// The path of this program (/proc/self/exe), for running it again or a program beside it. Throws
/// Error(kSoftware) if it cannot be read.
std::string own_program();

/// Registers every subcommand of `pcdino` on `app`.
void add_all_commands(CLI::App& app);

}  // namespace pcdino::cli
