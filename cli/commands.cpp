#include "commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "pcdino/core/error.hpp"

namespace pcdino::cli {

CLI::App* add_external(CLI::App& parent, const std::string& name, const std::string& program,
                       const std::string& summary, const std::string& issue) {
  CLI::App* sub = parent.add_subcommand(name, summary);
  // Everything after the name belongs to the program, --help included.
  sub->prefix_command();
  sub->set_help_flag();
  sub->callback([sub, name, program, issue] {
    std::vector<std::string> args = sub->remaining();
    const std::string path = (std::filesystem::path(own_program()).parent_path() / program).string();
    if (::access(path.c_str(), X_OK) != 0) {
      throw Error(ExitCode::kUnavailable, "pcdino " + name + ": " + program +
                                              " is not built next to pcdino (" + path +
                                              "; it needs LibTorch, tracked in issue " + issue + ")");
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(path.c_str()));
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    throw Error(ExitCode::kUnavailable,
                "pcdino " + name + ": cannot run " + path + ": " + std::strerror(errno));
  });
  return sub;
}

void add_exit_codes_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "exit-codes",
      "List the exit codes of pcdino's programs and batch scripts, and what each means (a Markdown "
      "table)");
  sub->callback([] { std::cout << exit_codes_markdown(); });
}

std::string own_program() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ExitCode::kSoftware, "cannot find pcdino's own path: " + ec.message());
  return self.string();
}

void add_all_commands(CLI::App& app) {
  add_dataset_commands(app);
  add_meanstd_command(app);
  add_external(app, "train", "pcdino-train", "DINO pretraining of a ViT (runs pcdino-train)", "#4");
  add_external(app, "extract", "pcdino-extract",
               "CLS features of the held-out split to HDF5 (MPI; runs pcdino-extract)", "#6");
  add_downstream_commands(app);

  add_pipeline_commands(app);
  add_config_command(app);
  add_metrics_command(app);
  add_exit_codes_command(app);
  add_doctor_command(app);
  add_node_check_command(app);

  add_cluster_commands(app);
  add_ami_commands(app);
}

}  // namespace pcdino::cli
