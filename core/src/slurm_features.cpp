#include "pcdino/core/slurm_features.hpp"

#include <algorithm>
#include <stdexcept>

#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::slurm {

const std::vector<Feature>& features() {
  static const std::vector<Feature> table = {
      {"force_requeue_on_fail", "23.02",
       "PrologFlags=ForceRequeueOnFail: a failed prolog requeues --no-requeue jobs too (the node check)",
       "slurm.conf(5) of 23.02 (22.05 refuses the flag)"},
      {"openmetrics", "25.11",
       "MetricsType=metrics/openmetrics: slurmctld serves /metrics/{nodes,jobs,partitions,scheduler}",
       "Slurm 25.11.7 RELEASE_NOTES.md, slurm.conf(5), src/slurmctld/http.c"},
      {"expedited_requeue", "25.11",
       "sbatch --requeue=expedite where SlurmctldParameters has enable_expedited_requeue: a requeued job "
       "is eligible at once (no requeue_delay, cred_expire by default); Slurm's own requeues of it (a node "
       "failure) also go first in the queue",
       "Slurm 25.11.7 RELEASE_NOTES.md, sbatch(1), slurm.conf(5); src/slurmctld/job_mgr.c"},
      {"health_check_start_only", "25.11",
       "HealthCheckNodeState=START_ONLY: the health check only when slurmd starts (pcdino keeps IDLE: its "
       "check must run between jobs)",
       "Slurm 25.11.7 slurm.conf(5)"},
  };
  return table;
}

const Feature& feature(const std::string& name) {
  const auto& t = features();
  const auto row = std::find_if(t.begin(), t.end(), [&](const Feature& f) { return name == f.name; });
  if (row == t.end()) throw std::invalid_argument("no Slurm feature '" + name + "' in the feature table");
  return *row;
}

bool has(const std::string& version, const std::string& name) {
  const Feature& f = feature(name);
  if (parallelcluster::version_numbers(version).size() < 2) return false;
  return parallelcluster::compare_versions(version, f.first_release) >= 0;
}

}  // namespace pcdino::slurm
