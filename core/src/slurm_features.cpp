#include "pcdino/core/slurm_features.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::slurm {
namespace {

std::string strip(const std::string& t) {
  const auto first = t.find_first_not_of(" \t"), last = t.find_last_not_of(" \t\r");
  return first == std::string::npos ? std::string() : t.substr(first, last - first + 1);
}

}  // namespace

const std::vector<Feature>& features() {
  static const std::vector<Feature> table = {
      {"force_requeue_on_fail", "23.02",
       "PrologFlags=ForceRequeueOnFail: a failed prolog requeues --no-requeue jobs too (the node check)",
       "slurm.conf(5) of 23.02 (22.05 refuses the flag)", "PrologFlags", "ForceRequeueOnFail"},
      {"openmetrics", "25.11",
       "MetricsType=metrics/openmetrics: slurmctld serves /metrics/{nodes,jobs,partitions,scheduler}",
       "Slurm 25.11.7 RELEASE_NOTES.md, slurm.conf(5), src/slurmctld/http.c", "MetricsType",
       "metrics/openmetrics"},
      {"expedited_requeue", "25.11",
       "sbatch --requeue=expedite where SlurmctldParameters has enable_expedited_requeue: a requeued job "
       "is eligible at once (no requeue_delay, cred_expire by default); Slurm's own requeues of it (a node "
       "failure) also go first in the queue",
       "Slurm 25.11.7 RELEASE_NOTES.md, sbatch(1), slurm.conf(5); src/slurmctld/job_mgr.c",
       "SlurmctldParameters", "enable_expedited_requeue"},
      {"health_check_start_only", "25.11",
       "HealthCheckNodeState=START_ONLY: the health check only when slurmd starts (pcdino keeps IDLE: its "
       "check must run between jobs)",
       "Slurm 25.11.7 slurm.conf(5)", "HealthCheckNodeState", "START_ONLY"},
      {"health_check_timeout", "26.05",
       "HealthCheckTimeout=N: slurmd kills the HealthCheckProgram after N s (default 60; 1..65535, 0 reset "
       "to 60); before 26.05 after a fixed 60 s. The node check runs within it",
       "Slurm 26.05.3 slurm.conf(5), src/common/read_config.c (S_P_UINT16), src/slurmd/slurmd/slurmd.c "
       "run_script_health_check (max_wait; 25.11.7's is 60 * 1000), src/api/config_info.c",
       "HealthCheckTimeout", ""},
      {"metrics_auth_users", "26.05",
       "MetricsAuthUsers=user,...: only these users (and SlurmUser, root), authenticated with JWT, may "
       "query slurmctld's /metrics, whatever PrivateData says",
       "Slurm 26.05.3 CHANGELOG/slurm-26.05.md (26.05.0rc1), slurm.conf(5)", "MetricsAuthUsers", ""},
      {"health_check_reboot_only", "26.05",
       "HealthCheckNodeState=REBOOT_ONLY: the health check only when slurmd reports back after a reboot "
       "(pcdino keeps IDLE, as for START_ONLY)",
       "Slurm 26.05.3 CHANGELOG/slurm-26.05.md, slurm.conf(5)", "HealthCheckNodeState", "REBOOT_ONLY"},
  };
  return table;
}

const Feature& feature(const std::string& name) {
  const auto& t = features();
  const auto row = std::find_if(t.begin(), t.end(), [&](const Feature& f) { return name == f.name; });
  if (row == t.end()) throw std::invalid_argument("no Slurm feature '" + name + "' in the feature table");
  return *row;
}

std::vector<const Feature*> features_of_setting(const std::string& key, const std::string& value) {
  std::vector<std::string> items;
  std::istringstream list(ascii_lower(value));
  for (std::string item; std::getline(list, item, ',');) items.push_back(strip(item));
  std::vector<const Feature*> asked;
  for (const Feature& f : features()) {
    if (ascii_lower(key) != ascii_lower(f.key)) continue;
    if (*f.value == '\0' || std::find(items.begin(), items.end(), ascii_lower(f.value)) != items.end())
      asked.push_back(&f);
  }
  return asked;
}

bool has(const std::string& version, const std::string& name) {
  const Feature& f = feature(name);
  if (parallelcluster::version_numbers(version).size() < 2) return false;
  return parallelcluster::compare_versions(version, f.first_release) >= 0;
}

std::map<std::string, std::string> parse_show_config(const std::string& text) {
  std::map<std::string, std::string> keys;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) keys[strip(line.substr(0, eq))] = strip(line.substr(eq + 1));
  }
  return keys;
}

}  // namespace pcdino::slurm
