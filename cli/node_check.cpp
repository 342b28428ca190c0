// pcdino node-check: this node's health for Slurm's Prolog and HealthCheckProgram (issue #60).
#include "pcdino/doctor/node_check.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/probes.hpp"
#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::cli {

namespace {

struct NodeCheckArgs {
  std::string site;
  std::vector<std::string> shared_dirs;
  std::string node;
  std::string json;
  bool slurm = false;
  bool wrapper = false;
  bool list = false;
  NodeCheckPaths paths;
  std::vector<std::string> path_dirs;
  std::string probe_filesystem;
  std::size_t probe_bytes = 1u << 20;
};

std::string this_node() {
  if (const char* n = std::getenv("SLURMD_NODENAME"); n != nullptr && *n != '\0') return n;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string name = host;
  return name.substr(0, name.find('.'));
}

// Slurm's side: drain (and, in the prolog, fail so that the job is requeued elsewhere), or return to service
// a node that pcdino drained. The lines go to stderr, which slurmd logs (the prolog's only on failure).
int act_for_slurm(const doctor::NodeCheckReport& report) {
  const bool prolog = std::getenv("SLURM_JOB_ID") != nullptr;
  const auto context = prolog ? doctor::SlurmContext::kProlog : doctor::SlurmContext::kHealthCheck;
  std::optional<doctor::SlurmNodeView> view;
  try {
    const ProcessResult shown = run_process({"scontrol", "show", "node", "-o", report.node}, "", 5);
    if (shown.exit_code == 0) view = doctor::parse_scontrol_node(shown.out);
  } catch (const std::exception& e) {  // no scontrol, or a line it cannot read: drain anyway, resume nothing
    std::cerr << "pcdino node-check: Slurm's view of " << report.node << ": " << e.what() << "\n";
  }
  for (const auto& command : doctor::slurm_actions(report, view ? &*view : nullptr, context)) {
    ProcessResult r;
    try {
      r = run_process(command, "Slurm's client commands", 5);
    } catch (const std::exception& e) {
      r.exit_code = to_int(ExitCode::kUnavailable), r.err = e.what();
    }
    std::cerr << "pcdino node-check ("
              << (prolog ? "prolog, job " + std::string(std::getenv("SLURM_JOB_ID")) : "health check")
              << "): " << (r.exit_code == 0 ? "" : "could not run (" + r.err + "): ")
              << shell_command(command) << "\n";
  }
  if (report.drain()) std::cerr << report.reason() << "\n";
  // A failed prolog makes Slurm requeue the job (the drain above keeps its reason); slurmd only logs the
  // health check's exit status.
  return prolog && report.drain() ? to_int(ExitCode::kFailure) : 0;
}

// The limit slurmd runs the check within: in the health check, the HealthCheckTimeout of the Slurm that
// `scontrol show config` names (26.05 on); in a prolog, pcdino's own 60 s (PrologEpilogTimeout is not read).
CheckLimit slurm_limit() {
  CheckLimit limit;
  if (std::getenv("SLURM_JOB_ID") != nullptr) {
    limit.source = "pcdino's limit in a prolog";
    return limit;
  }
  try {
    const ProcessResult shown = run_process({"scontrol", "show", "config"}, "", 5);
    if (shown.exit_code == 0) return doctor::health_check_limit(shown.out);
  } catch (const std::exception& e) {
    std::cerr << "pcdino node-check: Slurm's limit for the check: " << e.what() << "\n";
  }
  return limit;
}

// The drain guard (doctor::apply_drain_guard) with Slurm's view of every node: one `scontrol show nodes`,
// only when the report would drain. Slurm not answering leaves the report as it is.
std::vector<doctor::WithheldDrain> guard_drains(doctor::NodeCheckReport& report, const NodeCheckSite& site) {
  if (!report.drain()) return {};
  std::vector<doctor::SlurmNodeView> nodes;
  try {
    const ProcessResult shown = run_process({"scontrol", "show", "nodes", "-o"}, "", 5);
    if (shown.exit_code != 0) return {};
    std::istringstream lines(shown.out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("NodeName=", 0) == 0) nodes.push_back(doctor::parse_scontrol_node(line));
  } catch (const std::exception& e) {
    std::cerr << "pcdino node-check: the drain guard has no view of the nodes: " << e.what() << "\n";
    return {};
  }
  auto withheld = doctor::apply_drain_guard(report, nodes, site.drain_guard_percent / 100.0);
  for (const auto& w : withheld)
    std::cerr << "pcdino node-check: not draining " << report.node << " for " << w.check << ": " << w.drained
              << " of the " << w.nodes << " nodes of " << w.partitions << " already are (DrainGuardPercent "
              << site.drain_guard_percent << ")\n";
  return withheld;
}

// The verdict as the doctor's metrics (pcdino_doctor_check_ok per check, pcdino_doctor_node_healthy), so
// that the doctor's alert rule reads both; a file of the node's own, which replaces its earlier verdicts.
void record_metrics(const doctor::NodeCheckReport& report, const std::vector<doctor::WithheldDrain>& withheld,
                    const std::string& dir) {
  if (dir.empty()) return;
  monitoring::JobLabels labels = monitoring::labels_from_environment("doctor", 0);
  labels.node = report.node;
  monitoring::MetricsFile metrics({dir, 60, true, "pcdino_node_check_" + report.node + ".prom"}, labels);
  std::map<std::string, bool> ok;  // a check named twice (two shared filesystems) is ok when both are
  for (const auto& c : report.checks)
    ok[c.check.name] = ok.count(c.check.name) ? ok[c.check.name] && c.check.ok : c.check.ok;
  for (const auto& [name, passed] : ok) metrics.set("pcdino_doctor_check_ok", passed ? 1 : 0, name);
  metrics.set("pcdino_doctor_node_healthy", report.drain() ? 0 : 1);
  for (const auto& w : withheld) metrics.set("pcdino_doctor_drain_withheld", 1, w.check);
}

}  // namespace

void add_node_check_command(CLI::App& app) {
  auto a = std::make_shared<NodeCheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "node-check",
      "This node's health for Slurm's Prolog and HealthCheckProgram: shared filesystems, scratch, GPUs (Xid, "
      "ECC, row remapping, NVLink, DCGM level 1), EFA, the SPANK plugin and the image; no MPI, every probe "
      "under a time limit. Exit 0 healthy or warnings only, 1 a finding that drains the node");
  sub->footer(
      "Severities: drain (no job may start here: with --slurm the node is drained with the reason "
      "\"pcdino: ...\", and in a prolog the job is requeued elsewhere) and warn (printed and exported). With "
      "--slurm in the health check, a node that pcdino drained returns to service once every check passes; a "
      "node drained by anyone else is left alone. See why a node was drained with `sinfo -R`.");
  std::string site_keys;  // every key of the site file, from its table
  for (const auto& k : node_check_site_keys())
    site_keys += std::string(site_keys.empty() ? "" : ", ") + k.key;
  sub->add_option(
      "--site", a->site,
      "The site file: " + site_keys + " (written by pcdino cluster generate or sbatch/local-cluster)");
  sub->add_option("--shared-dir", a->shared_dirs,
                  "A shared filesystem's mount directory (besides the site's)");
  sub->add_option("--node", a->node,
                  "Slurm's name of this node (default: $SLURMD_NODENAME, else the host name)");
  sub->add_option("--json", a->json,
                  "Also write the report as JSON to this file (%n: the node's name; --wrapper's default "
                  "/var/log/pcdino/node-check.json)");
  sub->add_flag(
      "--slurm", a->slurm,
      "Act for Slurm: drain the node on a drain finding (in a prolog, $SLURM_JOB_ID set, also exit 1 "
      "so that Slurm requeues the job), and in the health check resume a node pcdino drained once "
      "it passes; every probe runs within half of Slurm's limit for the check (HealthCheckTimeout from "
      "Slurm 26.05, 60 s before), which the report's first line names");
  sub->add_flag("--list", a->list, "List the probes and exit");
  // The shared_fs probe's child process (run_node_check's `prober`): not for users.
  sub->add_option("--probe-filesystem", a->probe_filesystem)->group("");
  sub->add_option("--probe-bytes", a->probe_bytes)->group("");
  sub->add_flag("--wrapper", a->wrapper,
                "Print the script Slurm runs as Prolog and HealthCheckProgram (for --site, --slurm-conf, "
                "--path, --pcdino) and exit");
  sub->add_option("--slurm-conf", a->paths.slurm_conf, "--wrapper: slurm.conf when slurmd gives none")
      ->capture_default_str();
  sub->add_option("--path", a->path_dirs, "--wrapper: the PATH's directories (default: ParallelCluster's)");
  sub->add_option("--pcdino", a->paths.pcdino, "--wrapper: the pcdino program (default: this one)");
  sub->callback([a, sub] {
    if (a->list) {
      for (const auto* p : doctor::node_check_probes()) std::cout << p->name << "\t" << p->what << "\n";
      return;
    }
    if (a->wrapper) {
      if (a->site.empty())
        throw Error(ExitCode::kUsage, "--wrapper needs --site FILE (where the site file will be)");
      a->paths.site = a->site;
      if (sub->get_option("--json")->count() > 0) a->paths.json = a->json;
      if (sub->get_option("--pcdino")->count() == 0) a->paths.pcdino = own_program();
      if (!a->path_dirs.empty()) a->paths.path = a->path_dirs;
      std::cout << node_check_wrapper(a->paths);
      return;
    }
    if (!a->probe_filesystem.empty()) {  // the child process of the shared_fs probe
      std::cout << doctor::filesystem_probe_json(
                       doctor::probe_filesystem(a->probe_filesystem, a->probe_bytes))
                << std::endl;
      std::_Exit(0);
    }
    // From here on the probes' threads may outlive a return (a hung mount): every way out is _Exit.
    int code = 0;
    try {
      NodeCheckSite site = a->site.empty() ? NodeCheckSite{} : read_node_check_site(a->site);
      for (const auto& d : a->shared_dirs) site.shared_storage.push_back({d, ""});
      if (a->slurm) site.limit = slurm_limit();
      const std::string node = a->node.empty() ? this_node() : a->node;
      doctor::NodeCheckReport report = doctor::run_node_check(site, node, own_program());
      const auto withheld = a->slurm ? guard_drains(report, site) : std::vector<doctor::WithheldDrain>{};
      std::cout << doctor::format_node_check(report) << std::flush;
      try {
        if (!a->json.empty()) {
          std::string path = a->json;
          if (const auto at = path.find("%n"); at != std::string::npos) path.replace(at, 2, node);
          std::error_code error;
          std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
          write_file_atomic(path, doctor::node_check_json(report));
        }
        record_metrics(report, withheld, site.textfile_dir);
      } catch (const std::exception& e) {  // the report's copies are not worth a wrong verdict
        std::cerr << "pcdino node-check: " << e.what() << "\n";
      }
      code = a->slurm ? act_for_slurm(report) : report.drain() ? to_int(ExitCode::kFailure) : 0;
    } catch (const Error& e) {
      // The check itself failed (a bad site file): no finding about the node. For Slurm a prolog passes (a
      // failed one would drain every node for the site's mistake) and a health check's status is logged.
      std::cerr << "error: pcdino node-check: " << e.what() << std::endl;
      code = a->slurm ? (std::getenv("SLURM_JOB_ID") != nullptr ? 0 : to_int(e.code())) : to_int(e.code());
    } catch (const std::exception& e) {
      std::cerr << "error: pcdino node-check: " << e.what() << std::endl;
      code = a->slurm && std::getenv("SLURM_JOB_ID") != nullptr ? 0 : to_int(ExitCode::kSoftware);
    }
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  });
}

}  // namespace pcdino::cli
