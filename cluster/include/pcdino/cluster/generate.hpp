// The files `pcdino cluster generate` writes for a site spec.
#pragma once

#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"

namespace pcdino::cluster {

struct ClusterFiles {
  std::string cluster_config;  ///< cluster-config.yaml: ParallelCluster v3; ${PUBLIC_SUBNET_ID}-style
                               ///< placeholders for the network stack's outputs unless the spec names subnets
  std::string network_stack;   ///< network.yaml: CloudFormation VPC (public + private subnet in one AZ, IGW,
                               ///< NAT, EFA security group, S3 gateway endpoint, flow logs)
  std::string commands;        ///< commands.sh: create the stack, fill the placeholders, upload head-node.sh,
                               ///< create the cluster
  /// head-node.sh, the head node's OnNodeConfigured action ("" without a `spank`, `containers` or
  /// `node_check` section or monitoring.prometheus): with `spank`, installs
  /// spank_pcdino.so and its profiles from the pcdino image (/opt/pcdino) into /opt/slurm and makes
  /// /opt/slurm/etc/plugstack.conf include plugstack.conf.d/ with the plugin's line; with `containers`,
  /// turns on Pyxis (containers.hpp); with monitoring.prometheus, installs Prometheus (prometheus.hpp).
  /// Idempotent: a second run rewrites nothing. SLURM_PREFIX, PCDINO_PREFIX and PARALLELCLUSTER_EXAMPLES in
  /// its environment move it off /opt (the tests' ParallelCluster-shaped tree).
  std::string head_node_script;
  /// compute-node.sh, the compute nodes' OnNodeConfigured action ("" without a `containers` section):
  /// Enroot set up for Pyxis (containers.hpp).
  std::string compute_node_script;
  /// prometheus.yml ("" without monitoring.prometheus): what head-node.sh writes to
  /// /etc/prometheus/prometheus.yml (prometheus.hpp), written beside it for `promtool check config`.
  std::string prometheus_config;
};

/// Builds the three files. Throws ConfigError for a spec that cannot become a configuration at all
/// (the validators judge the rest).
ClusterFiles generate_cluster(const SiteSpec& spec);

/// Compute resource name for an instance type ("g4dn.12xlarge" -> "g4dn-12xlarge").
std::string compute_resource_name(const std::string& instance_type);

}  // namespace pcdino::cluster
