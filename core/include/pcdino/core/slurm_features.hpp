// The Slurm features pcdino uses only from the release that added them: one row each, with the release and
// where it was read. The cluster generator (a ParallelCluster release's Slurm, core/parallelcluster.hpp) and
// the submitter (the running cluster's SLURM_VERSION) ask this table; sbatch/local-cluster, a shell script,
// keeps its own checks of the same releases, each beside its line.
#pragma once

#include <string>
#include <vector>

namespace pcdino::slurm {

/// One feature: the first Slurm release (major.minor) that has it.
struct Feature {
  const char* name;           ///< "expedited_requeue"
  const char* first_release;  ///< "25.11"
  const char* what;           ///< what pcdino does with it
  const char* source;         ///< where the release was read
};

/// Every feature row, oldest release first.
const std::vector<Feature>& features();

/// The row of feature `name`. Throws std::invalid_argument for a name not in features().
const Feature& feature(const std::string& name);

/// Whether Slurm `version` ("25.11.7", "23.02") has feature `name`. False for an empty or unparsable
/// version (a release the tables do not know). Throws std::invalid_argument for a name not in features().
bool has(const std::string& version, const std::string& name);

}  // namespace pcdino::slurm
