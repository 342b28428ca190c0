// Offline validators for ParallelCluster v3 configurations: the checks users wish they had run before
// `pcluster create-cluster`, each reporting the configuration's own key path
// (Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled) with line and column.
#pragma once

#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino::cluster {

struct Finding {
  bool error = true;  ///< false: a warning
  std::string where;  ///< "cluster-config.yaml:31:13"
  std::string path;   ///< "Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled"
  std::string message;
  std::string source;  ///< where the rule comes from, when it is a fact about AWS
  std::string str() const;
};

struct ValidateOptions {
  bool allow_ssh_from_anywhere = false;
};

/// Runs every validator on a ParallelCluster v3 configuration (YAML text; `name` for messages): EFA only
/// on types that support it; EFA queues with a stated placement group and one subnet; EphemeralVolume only
/// with instance store; FSx capacity, throughput, compression and S3 paths valid for the deployment type;
/// queue and compute resource names and counts; MinCount <= MaxCount; head node and compute nodes not in
/// the same subnet; IMDSv2; no SSH from 0.0.0.0/0 unless allowed. Throws ConfigError only for text that is
/// not YAML.
std::vector<Finding> validate_cluster_config(const std::string& yaml_text, const std::string& name,
                                             const ValidateOptions& options = {});

/// Checks that a pipeline's stages fit a queue: GPUs per node (train_scDINO.num_gpus,
/// compute_cls_features.num_gpus) within the instance type's GPUs, train_scDINO.nnodes within MaxCount,
/// CPUs per node (num_workers per GPU task) within the vCPUs. `queue` "" = the first queue.
std::vector<Finding> check_pipeline_fit(const std::string& cluster_yaml, const std::string& name,
                                        const PipelineConfig& pipeline, const std::string& queue = "");

}  // namespace pcdino::cluster
