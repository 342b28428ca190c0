// The files `pcdino cluster generate` writes for a site spec.
#pragma once

#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"
#include "pcdino/cluster/validate.hpp"

namespace pcdino::cluster {

struct ClusterFiles {
  std::string cluster_config;  ///< cluster-config.yaml: ParallelCluster v3; ${PUBLIC_SUBNET_ID}-style
                               ///< placeholders for the network stack's outputs unless the spec names subnets
  std::string network_stack;   ///< network.yaml: CloudFormation VPC (public + private subnet in one AZ, IGW,
                               ///< NAT, EFA security group, S3 gateway endpoint, flow logs)
  std::string commands;        ///< commands.sh: create the stack, fill the placeholders, upload head-node.sh,
                               ///< create the cluster
  /// teardown.sh: removes what commands.sh created, in reverse order (commands.hpp, teardown_script).
  std::string teardown;
  /// head-node.sh, the head node's OnNodeConfigured action ("" without a `spank`, `containers` or
  /// `node_check` section or monitoring.prometheus): with `spank`, installs
  /// spank_pcdino.so and its profiles from the pcdino image (/opt/pcdino) into /opt/slurm and makes
  /// /opt/slurm/etc/plugstack.conf include plugstack.conf.d/ with the plugin's line; with `containers`,
  /// turns on Pyxis (containers.hpp); with monitoring.prometheus, installs Prometheus (prometheus.hpp).
  /// Idempotent: a second run rewrites nothing. Before its first change to a path it notes the path in
  /// PCDINO_STATE (default /var/lib/pcdino/head-node): a path it makes, or a copy of the file it replaces,
  /// and the package, systemd unit and IMDS rule it adds; `head-node.sh --remove` undoes those, newest
  /// first (a folder that others filled is kept, and said so), and deletes the record. SLURM_PREFIX,
  /// PCDINO_PREFIX, PARALLELCLUSTER_EXAMPLES and PCDINO_STATE in its environment move it off /opt and /var
  /// (the tests' ParallelCluster-shaped tree).
  std::string head_node_script;
  /// compute-node.sh, the compute nodes' OnNodeConfigured action ("" without a `containers` section):
  /// Enroot set up for Pyxis (containers.hpp).
  std::string compute_node_script;
  /// prometheus.yml ("" without monitoring.prometheus): what head-node.sh writes to
  /// /etc/prometheus/prometheus.yml (prometheus.hpp), written beside it for `promtool check config`.
  std::string prometheus_config;
};

/// Builds the files. Throws ConfigError for a spec that cannot become a configuration at all
/// (the validators judge the rest).
ClusterFiles generate_cluster(const SiteSpec& spec);

/// pcdino's findings on the site spec itself, beside those on the configuration (validate_cluster_config):
/// image.os past its vendor's end of support on `today` ("YYYY-MM-DD") is a policy finding, and one with
/// an end date still ahead a warning (core/parallelcluster.hpp, operating systems). `where` is the spec.
std::vector<Finding> site_findings(const SiteSpec& spec, const std::string& today);

/// Writes `files` into the folder `out` (made if missing) so that it never holds a mix of two runs' scripts:
/// every file goes first into a new temporary folder inside `out` (".generate.tmp.*", on the same
/// filesystem), scripts made executable (0755), then each is renamed into place, commands.sh last; a file
/// that an earlier run wrote and this one does not (compute-node.sh once containers are off) is removed;
/// other files in `out` are left alone. Call it only for files that passed validation. Returns the names
/// written, in the order they were moved in. Throws CantCreateError naming the path (the temporary folder
/// is removed).
std::vector<std::string> write_cluster_files(const ClusterFiles& files, const std::string& out);

/// Compute resource name for an instance type ("g4dn.12xlarge" -> "g4dn-12xlarge").
std::string compute_resource_name(const std::string& instance_type);

}  // namespace pcdino::cluster
