// Offline validation of ParallelCluster v3 configurations: what `pcluster create-cluster` would refuse,
// found before anyone pays for it. Three kinds of finding, kept apart:
//   error    ParallelCluster would reject the configuration (its schema, restated as data in
//            cluster/upstream/, or one of its validators that need no AWS call), or the cluster would
//            not work (EFA on a type without it, a queue the pipeline cannot fit);
//   policy   pcdino's security and layout advice (SSH CIDR, IMDSv2, head node and compute subnets);
//   warning  what ParallelCluster warns about, and what pcdino cannot check.
// Each finding names the configuration's own key path (Scheduling.SlurmQueues[0].ComputeResources[0].
// Efa.Enabled) with file:line:col, and the upstream source of the rule.
#pragma once

#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino::cluster {

enum class Severity { error, policy, warning };

/// "error", "policy", "warning".
const char* severity_name(Severity s);

struct Finding {
  Severity severity = Severity::error;
  std::string where;  ///< "cluster-config.yaml:31:13"
  std::string path;   ///< "Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled"
  std::string message;
  std::string source;  ///< where the rule comes from: an upstream file and class, or a dated AWS fact
  /// "error: file:line:col: path: message [source]"
  std::string str() const;
};

struct ValidateOptions {
  /// Accept HeadNode.Ssh.AllowedIps 0.0.0.0/0 (or left out) without a policy finding.
  bool allow_ssh_from_anywhere = false;
  /// The file is a template whose values written exactly "${NAME}" are filled in later (the generated
  /// cluster-config.yaml, rendered by commands.sh): such a value passes its key's pattern. Without this,
  /// any "${" left in a value is an error.
  bool template_placeholders = false;
  /// The ParallelCluster release the file is for ("" = the newest in pcdino/core/parallelcluster.hpp): the
  /// keys removed by then (schema_changes()) are errors, and Image.Os must be one of its operating systems.
  std::string release;
};

/// The ParallelCluster release whose schema and validators are restated ("3.11.1").
std::string parallelcluster_release();

/// A change of the cluster schema after parallelcluster_release(), as far as it was found in a source.
struct SchemaChange {
  const char* path;        ///< "LoginNodes.Pools[].Ssh.KeyName"
  const char* maybe_from;  ///< the first release that may have removed it (a warning from there)
  const char* removed;     ///< the first release known to refuse it (an error from there)
  const char* source;
};
const std::vector<SchemaChange>& schema_changes();

/// Why configurations for `release` cannot be checked ("" if they can): a release missing from the table, or
/// older than the schema pcdino restates (3.11.0; its cluster schema equals 3.11.1's).
std::string release_problem(const std::string& release);

/// What a configuration for `release` is checked against, for messages: "ParallelCluster 3.16.3: the 3.11.1
/// schema and offline validators, unchanged through 3.12.0, with 1 key(s) removed since; keys added after
/// 3.12.0 are not known to pcdino".
std::string schema_basis(const std::string& release);

/// Checks a ParallelCluster v3 configuration (YAML text; `name` for messages): the schema walk (unknown
/// keys with a did-you-mean, types as ParallelCluster's loader reads them, required keys, allowed values,
/// ranges, patterns, keys that exclude each other), the schema's cross-key rules, the offline validators
/// (names and counts, compute resource sizes and capacity blocks, EFA and placement groups, subnets,
/// FSx for Lustre capacity and throughput per deployment and storage type, mount dirs, custom action
/// URLs, tags), and pcdino's policy. At most one finding per key path and kind. Throws ConfigError only
/// for text that is not YAML (or writes a key twice in one mapping).
std::vector<Finding> validate_cluster_config(const std::string& yaml_text, const std::string& name,
                                             const ValidateOptions& options = {});

/// Checks that a pipeline's jobs fit the queue they go to (cluster/src/pipeline_fit.cpp): `queue`, else
/// slurm.partition, else the first queue (Slurm's default partition on ParallelCluster). slurm.partition must
/// name a queue of the file (and `queue` when both are given). Per compute resource of that queue (its
/// instance type from the catalogue; Instances: the smallest): GPUs per node (train_scDINO.num_gpus,
/// compute_cls_features.num_gpus, when slurm.gpus) within its NVIDIA GPUs, slurm.cpus_per_task times each
/// enabled stage's tasks per node within its CPUs (vCPUs, halved by DisableSimultaneousMultithreading), and
/// training's (num_workers + 1) CPUs per rank within them too; a check is an error when no compute resource
/// of the queue passes it, a warning for the ones it rules out otherwise. train_scDINO.nnodes within the
/// queue's MaxCount (10 where unset) summed. Every message starts with the pipeline's file and names its
/// key, the value and the limit. Throws ConfigError when `cluster_yaml` is not YAML.
std::vector<Finding> check_pipeline_fit(const std::string& cluster_yaml, const std::string& name,
                                        const PipelineConfig& pipeline, const std::string& queue = "");

}  // namespace pcdino::cluster
