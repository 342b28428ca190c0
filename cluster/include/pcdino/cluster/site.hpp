// The site spec of `pcdino cluster`: a short YAML file describing the cluster a team wants; the tool
// turns it into a ParallelCluster v3 configuration and a VPC stack (see cluster/examples/).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pcdino::cluster {

/// One line of slurm.conf as ParallelCluster's CustomSlurmSettings writes it: key = value pairs in order.
using SlurmLine = std::vector<std::pair<std::string, std::string>>;

/// Read (or read-write) access for the nodes' instance role to one S3 bucket (ParallelCluster's S3Access).
struct S3AccessSpec {
  std::string bucket;
  std::string key;  ///< object key or prefix with '*' ("" = the whole bucket)
  bool write = false;
};

struct QueueSpec {
  std::string name;
  std::string instance_type;
  int min_count = 0;
  int max_count = 1;
  bool efa = false;
  /// Placement group: "" = not stated (a validator wants it stated for EFA queues), "true" (one
  /// ParallelCluster makes), "false", or an existing group's name (PlacementGroup.Name).
  std::string placement_group;
  std::string capacity_type = "ONDEMAND";  ///< ONDEMAND, SPOT, CAPACITY_BLOCK
  /// cr-...: the capacity block (required for CAPACITY_BLOCK), or an on-demand capacity reservation
  /// (ONDEMAND). Not with SPOT.
  std::string capacity_reservation_id;
  /// arn:aws:resource-groups:...: a group of on-demand capacity reservations (ONDEMAND only; not with
  /// capacity_reservation_id).
  std::string capacity_reservation_resource_group_arn;
  std::string local_scratch;  ///< EphemeralVolume mount dir ("" = none)
  int root_volume_gib = 0;    ///< root EBS volume size, GiB (0 = the AMI's)
  SlurmLine slurm_settings;   ///< the queue's CustomSlurmSettings (its PartitionName line)
};

struct FsxSpec {
  bool enabled = false;
  std::string mount_dir = "/fsx";
  int capacity_gib = 1200;
  std::string deployment_type = "PERSISTENT_2";
  int throughput_per_tib = 125;     ///< 0: not set (SCRATCH)
  std::string compression = "LZ4";  ///< LZ4 or NONE (DataCompressionType left out of the config)
  std::string file_system_id;       ///< existing file system: the others are not used
  std::string import_path, export_path;
};

/// pcdino's SPANK plugin on the cluster: the head node's OnNodeConfigured action (head-node.sh) copies it
/// and its profiles from the pcdino image into /opt/slurm, which every node mounts from the head node, and
/// makes Slurm load it through /opt/slurm/etc/plugstack.conf.
struct SpankSpec {
  bool enabled = false;
  std::string s3_prefix;        ///< s3://bucket/prefix that commands.sh uploads head-node.sh to
  std::string default_profile;  ///< profile of jobs without --accel-profile (default from the queues)
};

/// Containers through Pyxis and Enroot, as ParallelCluster's official images ship them (containers: true, or
/// {s3_prefix}; issue #63). Pyxis is installed but off since 3.11.1, its example configuration under
/// /opt/parallelcluster/examples; ParallelCluster's tutorial "Running containerized jobs with Pyxis" turns it
/// on with an OnNodeConfigured action on the head node and on the compute nodes. pcdino generates both:
/// head-node.sh adds Pyxis's example line to /opt/slurm/etc/plugstack.conf.d with container_scope=job (a
/// requeued start of the same job and step ids would otherwise meet its lost start's container), and sets up
/// Enroot there for `enroot import`; compute-node.sh (each queue's OnNodeConfigured, before the site's own
/// custom_actions.on_node_configured) writes /etc/enroot/enroot.conf from the example with the containers'
/// data, cache and temporary files on the queue's local_scratch where it has one (the example keeps them in
/// memory, under /run), and enables Enroot's PMI hook for `srun --mpi=pmix`. Needs no pcdino image: the
/// official AMI and a pcdino container image (slurm.container_image) are enough.
struct ContainersSpec {
  bool enabled = false;
  /// s3://bucket/prefix that commands.sh uploads head-node.sh and compute-node.sh to: spank's, Prometheus's
  /// or node_check's where given.
  std::string s3_prefix;
  /// Enroot's layer cache on the compute nodes: "user" (ENROOT_CACHE_PATH .../cache/user-$(id -u), each
  /// user's own) or "group" (.../cache/group-$(id -g), shared by a Unix group's members).
  std::string cache = "user";
};

/// Prometheus on the head node (monitoring.prometheus: true, or {retention, s3_prefix}): head-node.sh
/// installs it from the head node OS's package (prometheus.hpp) with a prometheus.yml that finds the
/// compute nodes through EC2 and loads pcdino's rules from the pcdino image. Needs image.custom_ami.
struct PrometheusSpec {
  bool enabled = false;
  std::string retention = "15d";  ///< --storage.tsdb.retention.time (Prometheus's own default, 15d)
  /// s3://bucket/prefix that commands.sh uploads head-node.sh to: spank.s3_prefix where that is given.
  std::string s3_prefix;
};

/// pcdino's node check on every compute node (node_check: true, or {interval_seconds, probe_seconds,
/// min_scratch_gib, s3_prefix}; issue #60): head-node.sh writes its site file (the SharedStorage mount
/// directories, the queues' local scratch) into /opt/slurm/etc/pcdino and links the image's wrapper into
/// ParallelCluster's prolog.d; CustomSlurmSettings make the same wrapper the HealthCheckProgram and run the
/// prolog at allocation. Needs image.custom_ami (the wrapper and pcdino are the image's).
struct NodeCheckSpec {
  bool enabled = false;
  int interval_seconds = 300;  ///< HealthCheckInterval (s)
  int probe_seconds = 10;      ///< each probe's time limit (s)
  int min_scratch_gib = 10;    ///< free space each local scratch needs (GiB)
  /// s3://bucket/prefix that commands.sh uploads head-node.sh to: spank's or Prometheus's where given.
  std::string s3_prefix;
};

struct SiteSpec {
  std::string name;
  std::string region;
  std::string availability_zone;
  std::string head_node_type = "c5.2xlarge";
  std::string key_name;
  std::string ssh_allowed_cidr;  ///< required; 0.0.0.0/0 only with allow_ssh_from_anywhere
  bool allow_ssh_from_anywhere = false;
  /// The ParallelCluster release the configuration targets; only releases whose schema pcdino carries
  /// are accepted (parallelcluster_release()). commands.sh checks `pcluster version` against it.
  std::string parallelcluster_version;
  int head_root_volume_gib = 0;  ///< head node's root EBS volume, GiB (0 = the AMI's)
  /// Amazon Linux 2 reaches its end of support on 2026-06-30, so the default is its successor.
  std::string os = "alinux2023";
  std::string custom_ami;
  /// The image spec (`pcdino ami`) the custom AMI was built from, resolved against the site spec's folder:
  /// its ParallelCluster release, OS and region must be the site's (check_image_spec).
  std::string ami_spec;
  std::vector<QueueSpec> queues;
  FsxSpec fsx;
  int apps_ebs_gib = 0;  ///< EBS volume at /apps (0 = none)
  std::vector<std::string> iam_policies;
  std::vector<S3AccessSpec> s3_access;    ///< buckets the pipeline reads or writes (head and compute nodes)
  std::vector<SlurmLine> slurm_settings;  ///< Scheduling.SlurmSettings.CustomSlurmSettings
  std::map<std::string, std::string> tags;
  bool dashboards = true;
  bool logs = true;
  std::string on_node_configured;  ///< s3:// or https:// script of the compute nodes
  SpankSpec spank;
  ContainersSpec containers;
  PrometheusSpec prometheus;
  NodeCheckSpec node_check;
  // Existing network (else the generated VPC stack's outputs are used).
  std::string head_subnet_id, compute_subnet_id;
  std::string source;
};

/// One key of the site spec. The key table (cluster/src/site.cpp) names each key once: parsing, its error
/// messages, the known keys an "unknown key" error lists and site_keys() all follow it.
struct SiteKey {
  std::string path;           ///< dotted key path; "[]" marks a list's elements: "queues[].min_count"
  std::string type;           ///< "string", "integer", "bool", "mapping", "list of ...", ...
  std::string accepts;        ///< what a value must be, as error messages say it ("an EC2 instance type")
  std::string default_value;  ///< "" = none
  bool required = false;      ///< in a spec of defaults; a key required only with another says so in `doc`
  std::string doc;            ///< what it does
};

/// Every key of the site spec (sections included), in the order parse_site_spec() reads them.
const std::vector<SiteKey>& site_keys();

/// Parses a site spec. Throws ConfigError ("file:line:col: key.path: what"). Slurm settings that
/// ParallelCluster reserves are left to the validation of the generated configuration.
SiteSpec parse_site_spec(const std::string& yaml_text, const std::string& source);
SiteSpec load_site_spec(const std::string& path);

/// Where commands.sh uploads head-node.sh and compute-node.sh (s3://bucket/prefix, no trailing slash): the
/// s3_prefix that every head-node.sh section on agrees on after parse_site_spec() (spank,
/// monitoring.prometheus, node_check, containers); "" when none is on.
std::string head_node_s3_prefix(const SiteSpec& site);

/// Refuses an image built for another ParallelCluster release, OS or region than the site's: ParallelCluster
/// runs a custom AMI only with its own release's cookbook, Image.Os must be the AMI's OS, and an AMI lives in
/// one region. `image_source` names the image spec in the message. Throws ConfigError naming both files and
/// the three values of each (cluster/src/image_spec_check.cpp).
void check_image_spec(const SiteSpec& site, const std::string& image_release, const std::string& image_os,
                      const std::string& image_region, const std::string& image_source);

}  // namespace pcdino::cluster
