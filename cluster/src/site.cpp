#include "pcdino/cluster/site.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/cluster/script_grants.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/slurm_features.hpp"
#include "pcdino/core/yaml_reader.hpp"
#include "site_checks.hpp"
#include "site_table.hpp"

namespace pcdino::cluster {

namespace {
using namespace site_rows;

const char* const kInstance = R"([a-z][a-z0-9-]*\.[0-9a-z]+)";
const char* const kAnyText = R"([^\n]{1,512})";
const char* const kCidr = R"(([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2})";
const char* const kBucket = R"([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])";
const char* const kS3Prefix = R"(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?)";
const char* const kS3Path = R"(s3://[a-z0-9.-]{3,63}(/.*)?)";
const char* const kDir = R"(/[A-Za-z0-9/_.-]*)";
const char* const kSubnet = R"(subnet-[0-9a-f]{8,17})";

// A root volume no smaller than the AMI's: ParallelCluster's own AMIs have 40 GiB (constants.py
// EBS_VOLUME_SIZE_DEFAULT, v3.11.1), and its RootVolumeSizeValidator refuses less. EBS gp3 ends at 16 TiB.
Row root_volume(const char* path, Member<int> member) {
  return integer(
      path, member, 1, 16384, "root EBS volume, GiB; unset: the AMI's (at least 40 with ParallelCluster's)",
      [member](Scope& scope, const At& at, SiteSpec& s) {
        const int gib = member(s);
        if (gib != 0 && gib < 40 && s.custom_ami.empty())
          scope.reader.fail(
              at.value(), at.path,
              std::to_string(gib) + " GiB is smaller than the 40 GiB root volume of ParallelCluster's AMIs");
      });
}

// --- The tables: each key once, in reading order. ---

const Table& queue_table() {
  static const Table rows = {
      // Checked against ParallelCluster's own pattern by the validators, so that the message uses its key
      // path.
      text("name", PCDINO_SITE(queues.back().name), kAnyText, "a queue name", always,
           "the Slurm queue's name"),
      text("instance_type", PCDINO_SITE(queues.back().instance_type), kInstance, "an EC2 instance type",
           always, "the compute nodes' EC2 instance type"),
      integer("min_count", PCDINO_SITE(queues.back().min_count), 0, 10000, "static nodes (always running)"),
      integer("max_count", PCDINO_SITE(queues.back().max_count), 0, 10000, "nodes at most"),
      boolean("efa", PCDINO_SITE(queues.back().efa), "Elastic Fabric Adapter on the nodes"),
      other(
          {"placement_group", "bool or text", "true, false or a placement group's name", "", false,
           "a cluster placement group: one ParallelCluster makes (true), none (false), or an existing one by "
           "name (an on-demand capacity reservation's own group); unset: not stated (a validator wants it "
           "stated for EFA queues)"},
          [](Scope& scope, const At& at, SiteSpec& s) {
            s.queues.back().placement_group = scope.reader.text(
                at.parent, at.key, at.path, false, "true|false|[A-Za-z0-9][A-Za-z0-9._+=:@-]{0,254}",
                "true, false or a placement group's name");
          }),
      text("capacity_type", PCDINO_SITE(queues.back().capacity_type), "ONDEMAND|SPOT|CAPACITY_BLOCK",
           "ONDEMAND, SPOT or CAPACITY_BLOCK", never, "how the nodes are bought"),
      text(
          "capacity_reservation_id", PCDINO_SITE(queues.back().capacity_reservation_id), "cr-[0-9a-f]{17}",
          "a capacity reservation id cr-... (a CAPACITY_BLOCK queue needs its block's)",
          [](const SiteSpec& s) { return s.queues.back().capacity_type == "CAPACITY_BLOCK"; },
          "the capacity block (required with CAPACITY_BLOCK), or an on-demand capacity reservation"),
      text("capacity_reservation_resource_group_arn",
           PCDINO_SITE(queues.back().capacity_reservation_resource_group_arn),
           R"(arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9_.-]+)",
           "a resource group ARN arn:aws:resource-groups:REGION:ACCOUNT:group/NAME", never,
           "a group of on-demand capacity reservations (ONDEMAND only)"),
      // Reservations are on-demand capacity: a spot queue has none, a capacity block names its own id.
      rule([](Scope& scope, SiteSpec& s) {
        const QueueSpec& q = s.queues.back();
        const YAML::Node node = scope.at("");
        const std::string by_group = "capacity_reservation_resource_group_arn";
        const std::string reservation_key =
            !q.capacity_reservation_resource_group_arn.empty() ? by_group : "capacity_reservation_id";
        if (q.capacity_type == "SPOT" && node[reservation_key].IsDefined())
          scope.fail(node[reservation_key], reservation_key,
                     "a SPOT queue cannot use a capacity reservation (ONDEMAND or CAPACITY_BLOCK can)");
        if (q.capacity_type == "CAPACITY_BLOCK" && !q.capacity_reservation_resource_group_arn.empty())
          scope.fail(node[by_group], by_group,
                     "a CAPACITY_BLOCK queue names its block by capacity_reservation_id");
        if (!q.capacity_reservation_id.empty() && !q.capacity_reservation_resource_group_arn.empty())
          scope.fail(node[by_group], by_group,
                     "give capacity_reservation_id or capacity_reservation_resource_group_arn, not both");
      }),
      root_volume("root_volume_gib", PCDINO_SITE(queues.back().root_volume_gib)),
      other({"slurm_settings", "{Parameter: value}", "", "", false, "the queue's CustomSlurmSettings"},
            [](Scope& scope, const At& at, SiteSpec& s) {
              if (at.value().IsDefined())
                s.queues.back().slurm_settings = slurm_line(scope.reader, at.value(), at.path);
            }),
      text("local_scratch", PCDINO_SITE(queues.back().local_scratch), kDir, "an absolute mount dir", never,
           "where the instance store is mounted (EphemeralVolume), the place for a pipeline's "
           "train_scDINO.stage_dataset; unset: none"),
  };
  return rows;
}

const Table& s3_access_table() {
  static const Table rows = {
      text("bucket", PCDINO_SITE(s3_access.back().bucket), kBucket, "an S3 bucket name", always,
           "the bucket"),
      text("key", PCDINO_SITE(s3_access.back().key), kAnyText, "an object key or prefix/*", never,
           "an object key or prefix with '*'; unset: the whole bucket"),
      boolean("write", PCDINO_SITE(s3_access.back().write), "write access too"),
  };
  return rows;
}

const Table& prometheus_table() {
  static const Table rows = {
      text("retention", PCDINO_SITE(prometheus.retention), "[1-9][0-9]*(h|d|w|y)",
           "a Prometheus retention like 15d (hours h, days d, weeks w, years y)", never,
           "--storage.tsdb.retention.time"),
      text("s3_prefix", PCDINO_SITE(prometheus.s3_prefix), kS3Prefix, "an s3://bucket/prefix", never,
           "where commands.sh uploads head-node.sh; unset: another head-node.sh section's (spank, "
           "node_check, containers)",
           trim_slashes(PCDINO_SITE(prometheus.s3_prefix))),
  };
  return rows;
}

const Table& node_check_table() {
  static const Table rows = {
      integer("interval_seconds", PCDINO_SITE(node_check.interval_seconds), 10, 86400,
              "HealthCheckInterval: how often slurmd runs it on an idle node (s)"),
      integer("probe_seconds", PCDINO_SITE(node_check.probe_seconds), 1, kMaxProbeSeconds,
              "each probe's time limit, a hung mount's included (s)"),
      integer("min_scratch_gib", PCDINO_SITE(node_check.min_scratch_gib), 0, 1 << 20,
              "free space each queue's local_scratch needs (GiB)"),
      text("s3_prefix", PCDINO_SITE(node_check.s3_prefix), kS3Prefix, "an s3://bucket/prefix", never,
           "where commands.sh uploads head-node.sh; unset: another head-node.sh section's (spank, "
           "monitoring.prometheus, containers)",
           trim_slashes(PCDINO_SITE(node_check.s3_prefix))),
  };
  return rows;
}

const Table& containers_table() {
  static const Table rows = {
      text("s3_prefix", PCDINO_SITE(containers.s3_prefix), kS3Prefix, "an s3://bucket/prefix", never,
           "where commands.sh uploads head-node.sh and compute-node.sh; unset: spank's, "
           "monitoring.prometheus's or node_check's",
           trim_slashes(PCDINO_SITE(containers.s3_prefix))),
      text("cache", PCDINO_SITE(containers.cache), "user|group", "user or group", never,
           "whose Enroot layer cache each compute node keeps: each user's own (cache/user-UID), or one per "
           "Unix group (cache/group-GID, shared by its members: a member can replace what the others "
           "run)"),
  };
  return rows;
}

// The queues: a list of at least one, each read with queue_table().
void read_queues(Scope& scope, const At& at, SiteSpec& s) {
  const YAML::Node list = at.value();
  if (!list.IsDefined() || !list.IsSequence() || list.size() == 0)
    scope.reader.fail(at.parent, at.path, "expected a list of queues");
  read_items(
      scope, list, at.path, queue_table(), "expected a mapping",
      [](SiteSpec& spec) { spec.queues.emplace_back(); }, s);
}

// storage.fsx: given, FSx for Lustre is on, where the OS can mount it.
void enter_fsx(Scope& scope, const At& at, SiteSpec& s) {
  if (!at.value().IsDefined()) return;
  s.fsx.enabled = true;
  // A custom AMI may carry the Lustre client the official one lacks: the site's to know.
  if (const std::string why = parallelcluster::lustre_problem(s.parallelcluster_version, s.os);
      !why.empty() && s.custom_ami.empty())
    scope.reader.fail(scope.at("storage.fsx"), at.path, why);
}

// iam.additional_policies: a list of policy ARNs.
void read_policies(Scope& scope, const At& at, SiteSpec& s) {
  const YAML::Node list = at.value();
  if (!list.IsDefined()) return;
  if (!list.IsSequence()) scope.reader.fail(list, at.path, "expected a list of policy ARNs");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string arn = list[i].IsScalar() ? list[i].Scalar() : "";
    if (arn.rfind("arn:aws", 0) != 0)
      scope.reader.fail(list[i], at.path + "[" + std::to_string(i) + "]", "expected an IAM policy ARN");
    s.iam_policies.push_back(arn);
  }
}

// iam.s3_access: a list of mappings, each read with s3_access_table().
void read_s3_access(Scope& scope, const At& at, SiteSpec& s) {
  const YAML::Node list = at.value();
  if (!list.IsDefined()) return;
  if (!list.IsSequence()) scope.reader.fail(list, at.path, "expected a list of {bucket, key, write}");
  read_items(
      scope, list, at.path, s3_access_table(), "expected a mapping {bucket, key, write}",
      [](SiteSpec& spec) { spec.s3_access.emplace_back(); }, s);
}

// slurm.settings: a list of slurm.conf lines.
void read_slurm_settings(Scope& scope, const At& at, SiteSpec& s) {
  const YAML::Node list = at.value();
  if (!list.IsDefined()) return;
  if (!list.IsSequence())
    scope.reader.fail(list, at.path, "expected a list of slurm.conf lines, each a mapping (- Key: value)");
  for (std::size_t i = 0; i < list.size(); ++i)
    s.slurm_settings.push_back(slurm_line(scope.reader, list[i], at.path + "[" + std::to_string(i) + "]"));
}

// tags: a mapping of names to values.
void read_tags(Scope& scope, const At& at, SiteSpec& s) {
  if (!at.value().IsDefined()) return;
  const YAML::Node tags = scope.reader.map(at.parent, at.key, at.path, true);
  for (const auto& kv : tags) s.tags[kv.first.Scalar()] = kv.second.IsScalar() ? kv.second.Scalar() : "";
}

// A section given as true or false, or as a mapping read with `table` (its presence turns it on, as spank's):
// monitoring.prometheus, node_check.
void read_switch(Scope& scope, const At& at, SiteSpec& s, const Table& table, bool& enabled) {
  const YAML::Node node = at.value();
  if (node.IsDefined() && node.IsMap()) {
    Scope form(scope.reader, node, at.path, table);
    enabled = true;
    read_table(form, s);
  } else {
    enabled = scope.reader.boolean(at.parent, at.key, at.path, false);
  }
}

void read_prometheus(Scope& scope, const At& at, SiteSpec& s) {
  read_switch(scope, at, s, prometheus_table(), s.prometheus.enabled);
}

void read_node_check(Scope& scope, const At& at, SiteSpec& s) {
  read_switch(scope, at, s, node_check_table(), s.node_check.enabled);
}

void read_containers(Scope& scope, const At& at, SiteSpec& s) {
  read_switch(scope, at, s, containers_table(), s.containers.enabled);
}

// `row` with a default computed where the table is made (a member's default is blank).
Row computed_default(Row row, std::string value) {
  row.info.default_value = std::move(value);
  return row;
}

// The spec's own keys, its head node, image and queues.
Table cluster_rows() {
  const std::string newest = parallelcluster::newest_release().release;
  return {
      // A release of the table whose cluster schema pcdino restates (first_checked_release() on, with the
      // keys changed since); the newest by default.
      computed_default(
          text(
              "parallelcluster_version", PCDINO_SITE(parallelcluster_version), "[0-9]+\\.[0-9]+\\.[0-9]+",
              "a release like " + newest, never,
              "the ParallelCluster release the configuration is for (default: the newest in pcdino's release "
              "table); commands.sh checks `pcluster version`",
              [newest](Scope& scope, const At& at, SiteSpec& s) {
                if (s.parallelcluster_version.empty()) s.parallelcluster_version = newest;
                if (const std::string why = release_problem(s.parallelcluster_version); !why.empty())
                  scope.reader.fail(at.value(), at.path, why);
              }),
          newest),
      // ParallelCluster's cluster name: letters, digits, hyphens, starting with a letter, at most 60.
      text("name", PCDINO_SITE(name), R"([A-Za-z][A-Za-z0-9-]{0,59})",
           "a cluster name (letters, digits, '-')", always, "the cluster's name"),
      text("region", PCDINO_SITE(region), R"([a-z]{2}(-gov)?-[a-z]+-[0-9])", "an AWS region like us-west-2",
           always, "the AWS region"),
      text("availability_zone", PCDINO_SITE(availability_zone), R"([a-z]{2}(-gov)?-[a-z]+-[0-9][a-z])",
           "an availability zone like us-west-2a", always,
           "the availability zone of the nodes, in the region",
           [](Scope& scope, const At& at, SiteSpec& s) {
             if (s.availability_zone.rfind(s.region, 0) != 0)
               scope.reader.fail(at.value(), at.path,
                                 "'" + s.availability_zone + "' is not in region " + s.region);
           }),

      section("head_node", Need::required, "the head node"),
      text("head_node.instance_type", PCDINO_SITE(head_node_type), kInstance, "an EC2 instance type", never,
           "the head node's EC2 instance type"),
      text("head_node.key_name", PCDINO_SITE(key_name), kAnyText, "an EC2 key pair name", never,
           "the EC2 key pair for SSH"),
      text("head_node.ssh_allowed_cidr", PCDINO_SITE(ssh_allowed_cidr), kCidr, "a CIDR like 203.0.113.0/24",
           always,
           "where SSH is allowed from; 0.0.0.0/0 is a policy finding (fatal only with --strict) unless "
           "allow_ssh_from_anywhere"),
      boolean("head_node.allow_ssh_from_anywhere", PCDINO_SITE(allow_ssh_from_anywhere),
              "accept ssh_allowed_cidr 0.0.0.0/0 without the policy finding"),

      section("image", Need::optional, "the nodes' image"),
      text("image.os", PCDINO_SITE(os), "alinux2|alinux2023|ubuntu2204|ubuntu2404|ubuntu2004|rhel8|rhel9",
           "alinux2, alinux2023, ubuntu2004, ubuntu2204, ubuntu2404, rhel8 or rhel9", never,
           "the nodes' OS (Image.Os), one the release supports",
           [](Scope& scope, const At& at, SiteSpec& s) {
             if (const std::string why = parallelcluster::os_support_problem(s.parallelcluster_version, s.os);
                 !why.empty())
               scope.reader.fail(at.value().IsDefined() ? at.value() : scope.at(""), at.path, why);
           }),
      text("image.custom_ami", PCDINO_SITE(custom_ami), R"(ami-[0-9a-f]{8,17})", "an AMI id", never,
           "the nodes' AMI (the pcdino image); unset: ParallelCluster's"),
      // After custom_ami: ParallelCluster's AMIs bound it from below, the site's own does not.
      root_volume("head_node.root_volume_gib", PCDINO_SITE(head_root_volume_gib)),
      text("image.ami_spec", PCDINO_SITE(ami_spec), kAnyText, "the path of a pcdino ami spec", never,
           "the image spec custom_ami was built from, relative to the site spec: its release and OS must be "
           "the site's",
           [](Scope& scope, const At&, SiteSpec& s) {
             if (!s.ami_spec.empty())
               s.ami_spec = (std::filesystem::path(scope.reader.source()).parent_path() / s.ami_spec)
                                .lexically_normal()
                                .string();
           }),

      other({"queues", "list of queues", "", "", true, "the Slurm queues, one compute resource each"},
            read_queues, &queue_table(), "[]")};
}

// Shared storage, the instance role, Slurm and tags.
Table storage_rows() {
  return {section("storage", Need::optional, "shared storage"),
          integer("storage.apps_ebs_gib", PCDINO_SITE(apps_ebs_gib), 0, 16384,
                  "an EBS volume at /apps, GiB; 0 = none"),
          section("storage.fsx", Need::mapping_if_given, "FSx for Lustre, there when given", enter_fsx),
          text("storage.fsx.mount_dir", PCDINO_SITE(fsx.mount_dir), kDir, "an absolute path", never,
               "where it is mounted"),
          integer("storage.fsx.capacity_gib", PCDINO_SITE(fsx.capacity_gib), 1, 10000000, "its size, GiB"),
          text("storage.fsx.deployment_type", PCDINO_SITE(fsx.deployment_type), "[A-Z_0-9]+",
               "an FSx deployment type", never, "PERSISTENT_1, PERSISTENT_2, SCRATCH_1 or SCRATCH_2"),
          integer("storage.fsx.throughput_per_tib", PCDINO_SITE(fsx.throughput_per_tib), 0, 100000,
                  "MB/s per TiB; none (0) by default with a SCRATCH deployment type", nullptr,
                  [](const SiteSpec& s) {
                    return s.fsx.deployment_type.rfind("SCRATCH", 0) == 0 ? 0 : s.fsx.throughput_per_tib;
                  }),
          text("storage.fsx.compression", PCDINO_SITE(fsx.compression), "NONE|LZ4", "NONE or LZ4", never,
               "DataCompressionType"),
          text("storage.fsx.file_system_id", PCDINO_SITE(fsx.file_system_id), R"(fs-[0-9a-f]{8,17})",
               "an FSx id fs-...", never, "an existing file system (the keys above are then not used)"),
          text("storage.fsx.import_path", PCDINO_SITE(fsx.import_path), kS3Path, "an s3:// path", never,
               "the S3 path it imports"),
          text("storage.fsx.export_path", PCDINO_SITE(fsx.export_path), kS3Path, "an s3:// path", never,
               "the S3 path it exports to"),

          section("iam", Need::optional, "the nodes' instance role"),
          other({"iam.additional_policies", "list of strings", "IAM policy ARNs", "", false,
                 "policies attached to the nodes' role"},
                read_policies),
          other({"iam.s3_access", "list of {bucket, key, write}", "", "", false,
                 "buckets the pipeline reads or writes (head and compute nodes)"},
                read_s3_access, &s3_access_table(), "[]"),

          section("slurm", Need::optional, "the cluster's Slurm"),
          other({"slurm.settings", "list of {Parameter: value}", "", "", false,
                 "slurm.conf lines (Scheduling.SlurmSettings.CustomSlurmSettings)"},
                read_slurm_settings),
          rule(check_slurm_release),
          other({"tags", "{name: value}", "", "", false, "tags of the cluster's resources"}, read_tags)};
}

// Monitoring, custom actions, the SPANK plugin and the network.
Table service_rows() {
  return {
      section("monitoring", Need::optional, "CloudWatch and Prometheus"),
      boolean("monitoring.dashboards", PCDINO_SITE(dashboards), "CloudWatch dashboards"),
      boolean("monitoring.logs", PCDINO_SITE(logs), "CloudWatch logs"),
      other({"monitoring.prometheus", "bool or mapping", "true, false or {retention, s3_prefix}", "false",
             false, "Prometheus on the head node (needs image.custom_ami)"},
            read_prometheus, &prometheus_table()),

      section("custom_actions", Need::optional, "ParallelCluster's custom actions"),
      text("custom_actions.on_node_configured", PCDINO_SITE(on_node_configured), R"((s3|https)://[^\s]+)",
           "an s3:// or https:// script", never, "the compute nodes' OnNodeConfigured script"),

      section("spank", Need::optional, "pcdino's SPANK plugin on the cluster, there when given",
              [](Scope&, const At& at, SiteSpec& s) { s.spank.enabled = at.value().IsDefined(); }),
      text(
          "spank.s3_prefix", PCDINO_SITE(spank.s3_prefix), kS3Prefix, "an s3://bucket/prefix",
          [](const SiteSpec& s) { return s.spank.enabled; },
          "where commands.sh uploads head-node.sh (required with spank)",
          trim_slashes(PCDINO_SITE(spank.s3_prefix))),
      text("spank.default_profile", PCDINO_SITE(spank.default_profile), "[A-Za-z0-9_.-]+",
           "a profile name of accel-profiles.yaml", never,
           "the profile of jobs without --accel-profile; unset: from the queues"),
      // Pyxis is the containers section's now, with Enroot on the compute nodes: the old key is refused.
      other({"spank.pyxis", "bool", "", "", false, "moved: use containers (refused here)"},
            [](Scope& scope, const At& at, SiteSpec&) {
              if (at.value().IsDefined())
                scope.reader.fail(at.value(), at.path,
                                  "Pyxis is turned on by the containers section now (containers: true), "
                                  "which also sets up Enroot on the compute nodes; remove spank.pyxis");
            }),
      // The head node installs the plugin from the pcdino image: without one there is nothing to install.
      rule([](Scope& scope, SiteSpec& s) {
        if (s.spank.enabled && s.custom_ami.empty())
          scope.fail(scope.at("spank"), "spank",
                     "needs image.custom_ami, the pcdino image (`pcdino ami`) that holds the plugin");
      }),
      rule(check_prometheus),
      other({"node_check", "bool or mapping",
             "true, false or {interval_seconds, probe_seconds, min_scratch_gib, s3_prefix}", "false", false,
             "pcdino's node check as Slurm's prolog and health check (needs image.custom_ami)"},
            read_node_check, &node_check_table()),
      rule(check_node_check),
      other({"containers", "bool or mapping", "true, false or {s3_prefix}", "false", false,
             "Pyxis and Enroot turned on as ParallelCluster documents (head-node.sh, compute-node.sh), for "
             "slurm.container_image; needs no pcdino image"},
            read_containers, &containers_table()),
      rule(check_containers), rule(check_upload_prefix),

      section("network", Need::optional, "an existing network; unset: the generated VPC stack's"),
      text("network.head_subnet_id", PCDINO_SITE(head_subnet_id), kSubnet, "a subnet id", never,
           "the head node's subnet"),
      text("network.compute_subnet_id", PCDINO_SITE(compute_subnet_id), kSubnet, "a subnet id", never,
           "the compute nodes' subnet"),
      rule([](Scope& scope, SiteSpec& s) {
        if (s.head_subnet_id.empty() != s.compute_subnet_id.empty())
          scope.fail(scope.at("network"), "network",
                     "give both head_subnet_id and compute_subnet_id, or neither (a VPC stack is generated)");
      }),
      // Last, once every script's place is known: no write grant on a script run as root (script_grants.hpp).
      rule([](Scope& scope, SiteSpec& s) {
        for (std::size_t i = 0; i < s.s3_access.size(); ++i)
          if (const std::string why = write_grant_problem(s.s3_access[i], s); !why.empty())
            scope.fail(scope.at("iam")["s3_access"][i], "iam.s3_access[" + std::to_string(i) + "]", why);
      })};
}

// Every key of the spec, in reading order.
const Table& site_table() {
  static const Table rows = [] {
    Table t = cluster_rows();
    for (const Table& part : {storage_rows(), service_rows()}) t.insert(t.end(), part.begin(), part.end());
    return t;
  }();
  return rows;
}

#undef PCDINO_SITE

void list_keys(const Table& table, const std::string& prefix, std::vector<SiteKey>& keys) {
  for (const Row& row : table) {
    if (row.info.path.empty()) continue;  // a rule
    SiteKey key = row.info;
    key.path = prefix + key.path;
    keys.push_back(key);
    if (row.items != nullptr) list_keys(*row.items, key.path + row.item_path + ".", keys);
  }
}
}  // namespace

const std::vector<SiteKey>& site_keys() {
  static const std::vector<SiteKey> keys = [] {
    std::vector<SiteKey> k;
    list_keys(site_table(), "", k);
    return k;
  }();
  return keys;
}

SiteSpec parse_site_spec(const std::string& yaml_text, const std::string& source) {
  YamlReader r(source);
  const YAML::Node root = r.load(yaml_text);
  if (!root.IsMap())
    throw ConfigError(source + ": expected a mapping (name, region, head_node, queues, ...)");
  SiteSpec s;
  s.source = source;
  Scope scope(r, root, "", site_table());
  read_table(scope, s);
  return s;
}

SiteSpec load_site_spec(const std::string& path) {
  return parse_site_spec(read_file(path, "site spec"), path);
}

}  // namespace pcdino::cluster
