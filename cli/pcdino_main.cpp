// pcdino: one program, git-style subcommands. Parses the command line and maps errors to exit codes;
// everything else happens in the component libraries.

#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/version.hpp"

int main(int argc, char** argv) {
  using pcdino::ExitCode;
  using pcdino::to_int;

  CLI::App app{
      "pcdino: self-supervised DINO pretraining of Vision Transformers on Slurm clusters.\n"
      "Every stage reads --config pipeline.yaml (the workshop's scDINO_full_pipeline.yaml keys).",
      "pcdino"};
  app.require_subcommand(1);
  app.footer(pcdino::exit_codes_line() + " `pcdino exit-codes` says what each means.");
  app.set_version_flag("--version", [] { return pcdino::version_report(); });
  pcdino::cli::add_all_commands(app);

  if (argc < 2) {
    std::cerr << app.help();
    return to_int(ExitCode::kUsage);
  }
  // CLI11 reports an unknown first word as "a subcommand is required"; name it instead.
  const std::string first = argv[1];
  if (!first.empty() && first[0] != '-') {
    try {
      app.get_subcommand(first);
    } catch (const CLI::OptionNotFound&) {
      std::cerr << "pcdino: '" << first << "' is not a pcdino command. See 'pcdino --help'.\n";
      return to_int(ExitCode::kUsage);
    }
  }

  return pcdino::app::run_command_line(app, argc, argv);
}
