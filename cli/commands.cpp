#include "commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "pcdino/core/error.hpp"

namespace pcdino::cli {

CLI::App* add_unavailable(CLI::App& parent, const std::string& name, const std::string& summary,
                          const std::string& issue) {
  CLI::App* sub = parent.add_subcommand(name, summary + " [not built yet]");
  // Accept whatever a later version will accept, so the message below is what the user sees.
  sub->allow_extras();
  std::string full_name = name;
  for (const CLI::App* app = &parent; app != nullptr; app = app->get_parent()) {
    full_name = app->get_name() + " " + full_name;
  }
  sub->callback([full_name, issue] {
    throw Error(ExitCode::kUnavailable,
                full_name + ": not available in this build yet (tracked in issue " + issue + ")");
  });
  return sub;
}

CLI::App* add_external(CLI::App& parent, const std::string& name, const std::string& program,
                       const std::string& summary, const std::string& issue) {
  CLI::App* sub = parent.add_subcommand(name, summary);
  // Everything after the name belongs to the program, --help included.
  sub->prefix_command();
  sub->set_help_flag();
  sub->callback([sub, name, program, issue] {
    std::vector<std::string> args = sub->remaining();
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string path = (self.parent_path() / program).string();
    if (ec || ::access(path.c_str(), X_OK) != 0) {
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

void add_all_commands(CLI::App& app) {
  add_dataset_commands(app);
  add_meanstd_command(app);
  add_external(app, "train", "pcdino-train", "DINO pretraining of a ViT (runs pcdino-train)", "#4");
  add_external(app, "extract", "pcdino-extract",
               "CLS features of the held-out split to HDF5 (MPI; runs pcdino-extract)", "#6");
  add_downstream_commands(app);

  add_unavailable(app, "submit", "Submit the whole pipeline as a Slurm dependency chain", "#7");
  add_unavailable(app, "status", "State of a submitted pipeline's jobs", "#7");
  add_unavailable(app, "logs", "Tail of one stage's job output", "#7");
  add_unavailable(app, "cancel", "Cancel a submitted pipeline's jobs", "#7");
  add_unavailable(app, "resume", "Resubmit a pipeline from its first incomplete stage", "#7");

  add_cluster_commands(app);
  add_ami_commands(app);
}

}  // namespace pcdino::cli
