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

/// teardown.sh: removes what commands_script() created, newest first: `pcluster delete-cluster`, waiting
/// until its CloudFormation stack (named after the cluster) is gone, with the storage ParallelCluster made
/// for it (FSx for Lustre and the /apps EBS volume: DeletionPolicy Delete, ParallelCluster's default, which
/// pcdino does not change; a file system named by storage.fsx.file_system_id is the site's and stays); the
/// node scripts it uploaded (those objects only: never the bucket, the site's own custom action or data);
/// the network stack with its NAT gateway, waiting for it. Prints what it will delete and asks for the
/// cluster's name unless given --yes; --dry-run prints the commands and runs none. Values are shell-quoted.
std::string teardown_script(const SiteSpec& s);

}  // namespace pcdino::cluster
