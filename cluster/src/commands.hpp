// commands.sh, the script `pcdino cluster generate` writes to create the cluster (ClusterFiles::commands),
// and where it uploads the node scripts that the configuration names.
#pragma once

#include <string>

#include "pcdino/cluster/site.hpp"

namespace pcdino::cluster {

/// Where commands.sh uploads head-node.sh: head_node_s3_prefix() + "/head-node.sh".
std::string head_node_script_url(const SiteSpec& s);

/// Whether the head node has an OnNodeConfigured action (head-node.sh): the SPANK plugin, Prometheus, the
/// node check or containers is on.
bool has_head_node_script(const SiteSpec& s);

/// commands.sh: checks `pcluster version` against the spec's release, deploys the network stack (unless the
/// spec names subnets) and fills its outputs in, uploads head-node.sh and compute-node.sh, then
/// `pcluster create-cluster` with --dryrun first. Every value taken from the spec is shell-quoted.
std::string commands_script(const SiteSpec& s);

}  // namespace pcdino::cluster
