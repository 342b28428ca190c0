// The scripts ParallelCluster runs as root on the nodes, and the S3 write grants that would hand them out
// (issue #70): the compute nodes give every job the instance role, so a job that can write the object a
// custom action runs can replace it, and the next node that starts or is updated runs the job's script as
// root. pcdino refuses such a grant where the site spec is read (and again in generate_cluster()).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"

namespace pcdino::cluster {

/// An object in S3.
struct S3Object {
  std::string bucket;
  std::string key;
};

/// The object a custom action's script URL names: "s3://BUCKET/KEY", or an https:// URL of S3's own
/// endpoints, virtual-hosted ("https://BUCKET.s3[.REGION|-REGION][.dualstack].amazonaws.com[.cn]/KEY", with
/// s3-accelerate, s3-external-1 and the s3-website endpoints) or path style
/// ("https://s3[.REGION|-REGION].amazonaws.com/BUCKET/KEY"), the key percent-decoded and without query or
/// fragment. nullopt for any other URL (an access point, a CDN in front of a bucket, another host): whose
/// bucket serves it cannot be told from the URL, so no grant is judged against it.
std::optional<S3Object> s3_object(const std::string& url);

/// Whether the IAM resource pattern `pattern` matches `text`, as IAM matches an ARN's resource part: '*' any
/// run of characters ('/' included), '?' any one character, anything else itself (case-sensitive).
bool iam_pattern_matches(const std::string& pattern, const std::string& text);

/// Whether `grant` (ParallelCluster's S3Access) reaches `object`: ParallelCluster grants the resource
/// arn:aws:s3:::BucketName/KeyName, or BucketName and BucketName/* without a KeyName
/// (aws-parallelcluster cli/src/pcluster/config/cluster_config.py, S3Access.resource_regex).
bool grant_covers(const S3AccessSpec& grant, const S3Object& object);

/// A script ParallelCluster runs as root that the site names.
struct RootScript {
  std::string what;  ///< "head-node.sh, the head node's OnNodeConfigured and OnNodeUpdated action"
  std::string url;   ///< where ParallelCluster fetches it
};

/// head-node.sh and compute-node.sh where commands.sh uploads them (head_node_s3_prefix(), when the site has
/// them), and custom_actions.on_node_configured.
std::vector<RootScript> root_scripts(const SiteSpec& site);

/// "" for a read-only grant or one that reaches no root script; else why it is refused, naming the grant's
/// bucket and key pattern and the script's key.
std::string write_grant_problem(const S3AccessSpec& grant, const SiteSpec& site);

/// Throws ConfigError ("<source>: iam.s3_access[i]: ...") for the first write grant that reaches a root
/// script.
void check_script_grants(const SiteSpec& site);

}  // namespace pcdino::cluster
