// The Slurm features pcdino uses only from the release that added them: one row each, with the release and
// where it was read. The cluster generator (a ParallelCluster release's Slurm, core/parallelcluster.hpp) and
// the submitter (the running cluster's SLURM_VERSION) ask this table; sbatch/local-cluster, a shell script,
// keeps its own checks of the same releases, each beside its line.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pcdino::slurm {

/// One feature: the first Slurm release (major.minor) that has it.
struct Feature {
  const char* name;           ///< "expedited_requeue"
  const char* first_release;  ///< "25.11"
  const char* what;           ///< what pcdino does with it
  const char* source;         ///< where the release was read
  const char* key;            ///< the slurm.conf key that asks for it: "SlurmctldParameters"
  const char* value;          ///< the item of that key's comma list that does ("" = the key itself)
};

/// Every feature row, oldest release first.
const std::vector<Feature>& features();

/// The row of feature `name`. Throws std::invalid_argument for a name not in features().
const Feature& feature(const std::string& name);

/// The rows a slurm.conf line `key`=`value` asks for: `key` compared as Slurm does (case-insensitive),
/// and, where a row names a value, that value among the comma-separated items of `value`
/// ("HealthCheckNodeState=IDLE,REBOOT_ONLY" asks for health_check_reboot_only). Empty for a line every
/// release in the table has.
std::vector<const Feature*> features_of_setting(const std::string& key, const std::string& value);

/// Whether Slurm `version` ("25.11.7", "23.02") has feature `name`. False for an empty or unparsable
/// version (a release the tables do not know). Throws std::invalid_argument for a name not in features().
bool has(const std::string& version, const std::string& name);

/// `scontrol show config`'s "Key = value" lines as a map: keys as Slurm prints them ("SLURM_VERSION",
/// "HealthCheckTimeout"), values with the spaces around them removed ("60 sec", "(null)"); lines without
/// '=' (the header, the blank ones) are skipped.
std::map<std::string, std::string> parse_show_config(const std::string& text);

}  // namespace pcdino::slurm
