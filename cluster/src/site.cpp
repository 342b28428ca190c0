#include "pcdino/cluster/site.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::cluster {

namespace {
const char* const kInstance = R"([a-z][a-z0-9-]*\.[0-9a-z]+)";
const char* const kAnyText = R"([^\n]{1,512})";
const char* const kCidr = R"(([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2})";
const char* const kBucket = R"([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])";

// A root volume no smaller than the AMI's: ParallelCluster's own AMIs have 40 GiB (constants.py
// EBS_VOLUME_SIZE_DEFAULT, v3.11.1), and its RootVolumeSizeValidator refuses less. EBS gp3 ends at 16 TiB.
int root_volume(const YamlReader& r, const YAML::Node& parent, const std::string& path, bool custom_ami) {
  const int gib = r.integer(parent, "root_volume_gib", path, 1, 16384, 0);
  if (gib != 0 && gib < 40 && !custom_ami)
    r.fail(parent["root_volume_gib"], path,
           std::to_string(gib) + " GiB is smaller than the 40 GiB root volume of ParallelCluster's AMIs");
  return gib;
}

// One slurm.conf line: a mapping of Slurm parameters (their case as Slurm documents it) to scalar values.
SlurmLine slurm_line(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap() || node.size() == 0)
    r.fail(node, path, "expected a mapping of slurm.conf parameters to values (Key: value)");
  SlurmLine line;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (!kv.second.IsScalar() || kv.second.Scalar().empty())
      r.fail(kv.second, YamlReader::join(path, key), "expected a value for the slurm.conf parameter");
    line.emplace_back(key, kv.second.Scalar());
  }
  return line;
}
}  // namespace

SiteSpec parse_site_spec(const std::string& yaml_text, const std::string& source) {
  YamlReader r(source);
  const YAML::Node root = r.load(yaml_text);
  if (!root.IsMap())
    throw ConfigError(source + ": expected a mapping (name, region, head_node, queues, ...)");
  r.only(root, "",
         {"name", "region", "availability_zone", "parallelcluster_version", "head_node", "image", "queues",
          "storage", "iam", "slurm", "tags", "monitoring", "custom_actions", "network", "spank"});
  SiteSpec s;
  s.source = source;
  // A release of the table whose cluster schema pcdino restates (first_checked_release() on, with the keys
  // changed since); the newest by default.
  const std::string newest = parallelcluster::newest_release().release;
  s.parallelcluster_version = r.text(root, "parallelcluster_version", "parallelcluster_version", false,
                                     "[0-9]+\\.[0-9]+\\.[0-9]+", "a release like " + newest);
  if (s.parallelcluster_version.empty()) s.parallelcluster_version = newest;
  if (const std::string why = release_problem(s.parallelcluster_version); !why.empty())
    r.fail(root["parallelcluster_version"], "parallelcluster_version", why);
  // ParallelCluster's cluster name: letters, digits, hyphens, starting with a letter, at most 60.
  s.name = r.text(root, "name", "name", true, R"([A-Za-z][A-Za-z0-9-]{0,59})",
                  "a cluster name (letters, digits, '-')");
  s.region = r.text(root, "region", "region", true, R"([a-z]{2}(-gov)?-[a-z]+-[0-9])",
                    "an AWS region like us-west-2");
  s.availability_zone =
      r.text(root, "availability_zone", "availability_zone", true, R"([a-z]{2}(-gov)?-[a-z]+-[0-9][a-z])",
             "an availability zone like us-west-2a");
  if (s.availability_zone.rfind(s.region, 0) != 0) {
    r.fail(root["availability_zone"], "availability_zone",
           "'" + s.availability_zone + "' is not in region " + s.region);
  }

  const YAML::Node head = r.map(root, "head_node", "head_node", true);
  r.only(head, "head_node",
         {"instance_type", "key_name", "ssh_allowed_cidr", "allow_ssh_from_anywhere", "root_volume_gib"});
  const std::string head_type =
      r.text(head, "instance_type", "head_node.instance_type", false, kInstance, "an EC2 instance type");
  if (!head_type.empty()) s.head_node_type = head_type;
  s.key_name = r.text(head, "key_name", "head_node.key_name", false, kAnyText, "an EC2 key pair name");
  s.ssh_allowed_cidr = r.text(head, "ssh_allowed_cidr", "head_node.ssh_allowed_cidr", true, kCidr,
                              "a CIDR like 203.0.113.0/24");
  s.allow_ssh_from_anywhere =
      r.boolean(head, "allow_ssh_from_anywhere", "head_node.allow_ssh_from_anywhere", false);

  const YAML::Node image = r.map(root, "image", "image", false);
  r.only(image, "image", {"os", "custom_ami", "ami_spec"});
  const std::string os = r.text(image, "os", "image.os", false,
                                "alinux2|alinux2023|ubuntu2204|ubuntu2404|ubuntu2004|rhel8|rhel9",
                                "alinux2, alinux2023, ubuntu2004, ubuntu2204, ubuntu2404, rhel8 or rhel9");
  if (!os.empty()) s.os = os;
  if (const std::string why = parallelcluster::os_support_problem(s.parallelcluster_version, s.os);
      !why.empty())
    r.fail(image["os"].IsDefined() ? image["os"] : root, "image.os", why);
  s.custom_ami = r.text(image, "custom_ami", "image.custom_ami", false, R"(ami-[0-9a-f]{8,17})", "an AMI id");
  s.head_root_volume_gib = root_volume(r, head, "head_node.root_volume_gib", !s.custom_ami.empty());
  s.ami_spec = r.text(image, "ami_spec", "image.ami_spec", false, kAnyText, "the path of a pcdino ami spec");
  if (!s.ami_spec.empty())
    s.ami_spec = (std::filesystem::path(source).parent_path() / s.ami_spec).lexically_normal().string();

  const YAML::Node queues = root["queues"];
  if (!queues.IsDefined() || !queues.IsSequence() || queues.size() == 0)
    r.fail(root, "queues", "expected a list of queues");
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const std::string p = "queues[" + std::to_string(i) + "]";
    const YAML::Node q = queues[i];
    if (!q.IsMap()) r.fail(q, p, "expected a mapping");
    r.only(q, p,
           {"name", "instance_type", "min_count", "max_count", "efa", "placement_group", "capacity_type",
            "local_scratch", "capacity_reservation_id", "capacity_reservation_resource_group_arn",
            "root_volume_gib", "slurm_settings"});
    QueueSpec qs;
    // Checked against ParallelCluster's own pattern by the validators, so that the message uses its key path.
    qs.name = r.text(q, "name", p + ".name", true, kAnyText, "a queue name");
    qs.instance_type =
        r.text(q, "instance_type", p + ".instance_type", true, kInstance, "an EC2 instance type");
    qs.min_count = r.integer(q, "min_count", p + ".min_count", 0, 10000, 0);
    qs.max_count = r.integer(q, "max_count", p + ".max_count", 0, 10000, 1);
    qs.efa = r.boolean(q, "efa", p + ".efa", false);
    if (q["placement_group"].IsDefined())
      qs.placement_group = r.boolean(q, "placement_group", p + ".placement_group", false) ? "true" : "false";
    const std::string cap = r.text(q, "capacity_type", p + ".capacity_type", false,
                                   "ONDEMAND|SPOT|CAPACITY_BLOCK", "ONDEMAND, SPOT or CAPACITY_BLOCK");
    if (!cap.empty()) qs.capacity_type = cap;
    qs.capacity_reservation_id = r.text(
        q, "capacity_reservation_id", p + ".capacity_reservation_id", qs.capacity_type == "CAPACITY_BLOCK",
        "cr-[0-9a-f]{17}", "a capacity reservation id cr-... (a CAPACITY_BLOCK queue needs its block's)");
    qs.capacity_reservation_resource_group_arn =
        r.text(q, "capacity_reservation_resource_group_arn", p + ".capacity_reservation_resource_group_arn",
               false, R"(arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9_.-]+)",
               "a resource group ARN arn:aws:resource-groups:REGION:ACCOUNT:group/NAME");
    // Reservations are on-demand capacity: a spot queue has none, a capacity block names its own id.
    const std::string reservation_key = !qs.capacity_reservation_resource_group_arn.empty()
                                            ? "capacity_reservation_resource_group_arn"
                                            : "capacity_reservation_id";
    if (qs.capacity_type == "SPOT" && q[reservation_key].IsDefined())
      r.fail(q[reservation_key], p + "." + reservation_key,
             "a SPOT queue cannot use a capacity reservation (ONDEMAND or CAPACITY_BLOCK can)");
    if (qs.capacity_type == "CAPACITY_BLOCK" && !qs.capacity_reservation_resource_group_arn.empty())
      r.fail(q["capacity_reservation_resource_group_arn"], p + ".capacity_reservation_resource_group_arn",
             "a CAPACITY_BLOCK queue names its block by capacity_reservation_id");
    if (!qs.capacity_reservation_id.empty() && !qs.capacity_reservation_resource_group_arn.empty())
      r.fail(q["capacity_reservation_resource_group_arn"], p + ".capacity_reservation_resource_group_arn",
             "give capacity_reservation_id or capacity_reservation_resource_group_arn, not both");
    qs.root_volume_gib = root_volume(r, q, p + ".root_volume_gib", !s.custom_ami.empty());
    if (q["slurm_settings"].IsDefined())
      qs.slurm_settings = slurm_line(r, q["slurm_settings"], p + ".slurm_settings");
    qs.local_scratch = r.text(q, "local_scratch", p + ".local_scratch", false, R"(/[A-Za-z0-9/_.-]*)",
                              "an absolute mount dir");
    s.queues.push_back(qs);
  }

  const YAML::Node storage = r.map(root, "storage", "storage", false);
  r.only(storage, "storage", {"fsx", "apps_ebs_gib"});
  s.apps_ebs_gib = r.integer(storage, "apps_ebs_gib", "storage.apps_ebs_gib", 0, 16384, 0);
  if (storage["fsx"].IsDefined()) {
    const YAML::Node f = r.map(storage, "fsx", "storage.fsx", true);
    r.only(f, "storage.fsx",
           {"mount_dir", "capacity_gib", "deployment_type", "throughput_per_tib", "compression",
            "file_system_id", "import_path", "export_path"});
    s.fsx.enabled = true;
    // A custom AMI may carry the Lustre client the official one lacks: the site's to know.
    if (const std::string why = parallelcluster::lustre_problem(s.parallelcluster_version, s.os);
        !why.empty() && s.custom_ami.empty())
      r.fail(f, "storage.fsx", why);
    const std::string mount =
        r.text(f, "mount_dir", "storage.fsx.mount_dir", false, R"(/[A-Za-z0-9/_.-]*)", "an absolute path");
    if (!mount.empty()) s.fsx.mount_dir = mount;
    s.fsx.capacity_gib = r.integer(f, "capacity_gib", "storage.fsx.capacity_gib", 1, 10000000, 1200);
    const std::string dt = r.text(f, "deployment_type", "storage.fsx.deployment_type", false, "[A-Z_0-9]+",
                                  "an FSx deployment type");
    if (!dt.empty()) s.fsx.deployment_type = dt;
    s.fsx.throughput_per_tib = r.integer(f, "throughput_per_tib", "storage.fsx.throughput_per_tib", 0, 100000,
                                         s.fsx.deployment_type.rfind("SCRATCH", 0) == 0 ? 0 : 125);
    const std::string comp =
        r.text(f, "compression", "storage.fsx.compression", false, "NONE|LZ4", "NONE or LZ4");
    if (!comp.empty()) s.fsx.compression = comp;
    s.fsx.file_system_id = r.text(f, "file_system_id", "storage.fsx.file_system_id", false,
                                  R"(fs-[0-9a-f]{8,17})", "an FSx id fs-...");
    s.fsx.import_path = r.text(f, "import_path", "storage.fsx.import_path", false,
                               R"(s3://[a-z0-9.-]{3,63}(/.*)?)", "an s3:// path");
    s.fsx.export_path = r.text(f, "export_path", "storage.fsx.export_path", false,
                               R"(s3://[a-z0-9.-]{3,63}(/.*)?)", "an s3:// path");
  }

  const YAML::Node iam = r.map(root, "iam", "iam", false);
  r.only(iam, "iam", {"additional_policies", "s3_access"});
  if (iam["additional_policies"].IsDefined()) {
    const YAML::Node list = iam["additional_policies"];
    if (!list.IsSequence()) r.fail(list, "iam.additional_policies", "expected a list of policy ARNs");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string arn = list[i].IsScalar() ? list[i].Scalar() : "";
      if (arn.rfind("arn:aws", 0) != 0)
        r.fail(list[i], "iam.additional_policies[" + std::to_string(i) + "]", "expected an IAM policy ARN");
      s.iam_policies.push_back(arn);
    }
  }
  if (iam["s3_access"].IsDefined()) {
    const YAML::Node list = iam["s3_access"];
    if (!list.IsSequence()) r.fail(list, "iam.s3_access", "expected a list of {bucket, key, write}");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string p = "iam.s3_access[" + std::to_string(i) + "]";
      if (!list[i].IsMap()) r.fail(list[i], p, "expected a mapping {bucket, key, write}");
      r.only(list[i], p, {"bucket", "key", "write"});
      S3AccessSpec a;
      a.bucket = r.text(list[i], "bucket", p + ".bucket", true, kBucket, "an S3 bucket name");
      a.key = r.text(list[i], "key", p + ".key", false, kAnyText, "an object key or prefix/*");
      a.write = r.boolean(list[i], "write", p + ".write", false);
      s.s3_access.push_back(a);
    }
  }
  const YAML::Node slurm = r.map(root, "slurm", "slurm", false);
  r.only(slurm, "slurm", {"settings"});
  if (slurm["settings"].IsDefined()) {
    const YAML::Node list = slurm["settings"];
    if (!list.IsSequence())
      r.fail(list, "slurm.settings", "expected a list of slurm.conf lines, each a mapping (- Key: value)");
    for (std::size_t i = 0; i < list.size(); ++i)
      s.slurm_settings.push_back(slurm_line(r, list[i], "slurm.settings[" + std::to_string(i) + "]"));
  }
  if (root["tags"].IsDefined()) {
    const YAML::Node tags = r.map(root, "tags", "tags", true);
    for (const auto& kv : tags) s.tags[kv.first.Scalar()] = kv.second.IsScalar() ? kv.second.Scalar() : "";
  }
  const YAML::Node mon = r.map(root, "monitoring", "monitoring", false);
  r.only(mon, "monitoring", {"dashboards", "logs", "prometheus"});
  s.dashboards = r.boolean(mon, "dashboards", "monitoring.dashboards", true);
  s.logs = r.boolean(mon, "logs", "monitoring.logs", true);
  // monitoring.prometheus: true, or a mapping (its presence turns it on, as spank's).
  const YAML::Node prom = mon["prometheus"];
  if (prom.IsDefined() && prom.IsMap()) {
    r.only(prom, "monitoring.prometheus", {"retention", "s3_prefix"});
    s.prometheus.enabled = true;
    const std::string retention =
        r.text(prom, "retention", "monitoring.prometheus.retention", false, "[1-9][0-9]*(h|d|w|y)",
               "a Prometheus retention like 15d (hours h, days d, weeks w, years y)");
    if (!retention.empty()) s.prometheus.retention = retention;
    s.prometheus.s3_prefix =
        r.text(prom, "s3_prefix", "monitoring.prometheus.s3_prefix", false,
               R"(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?)", "an s3://bucket/prefix");
    while (!s.prometheus.s3_prefix.empty() && s.prometheus.s3_prefix.back() == '/')
      s.prometheus.s3_prefix.pop_back();
  } else {
    s.prometheus.enabled = r.boolean(mon, "prometheus", "monitoring.prometheus", false);
  }
  const YAML::Node actions = r.map(root, "custom_actions", "custom_actions", false);
  r.only(actions, "custom_actions", {"on_node_configured"});
  s.on_node_configured = r.text(actions, "on_node_configured", "custom_actions.on_node_configured", false,
                                R"((s3|https)://[^\s]+)", "an s3:// or https:// script");
  const YAML::Node spank = r.map(root, "spank", "spank", false);
  r.only(spank, "spank", {"s3_prefix", "default_profile", "pyxis"});
  s.spank.enabled = root["spank"].IsDefined();
  s.spank.s3_prefix = r.text(spank, "s3_prefix", "spank.s3_prefix", s.spank.enabled,
                             R"(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?)", "an s3://bucket/prefix");
  while (!s.spank.s3_prefix.empty() && s.spank.s3_prefix.back() == '/') s.spank.s3_prefix.pop_back();
  s.spank.default_profile = r.text(spank, "default_profile", "spank.default_profile", false,
                                   "[A-Za-z0-9_.-]+", "a profile name of accel-profiles.yaml");
  s.spank.pyxis = r.boolean(spank, "pyxis", "spank.pyxis", false);
  // The head node installs the plugin from the pcdino image: without one there is nothing to install.
  if (s.spank.enabled && s.custom_ami.empty())
    r.fail(spank, "spank", "needs image.custom_ami, the pcdino image (`pcdino ami`) that holds the plugin");

  if (s.prometheus.enabled) {
    const YAML::Node at = mon["prometheus"];
    // The head node installs Prometheus from its OS's own package, and the rules from the pcdino image.
    const PrometheusPackage* package = prometheus_package(s.os);
    if (package == nullptr || *package->package == '\0') {
      std::string offered;
      for (const auto& row : prometheus_packages())
        if (*row.package != '\0') offered += (offered.empty() ? "" : ", ") + std::string(row.os);
      r.fail(at, "monitoring.prometheus",
             "the head node (image.os " + s.os + ") has no Prometheus package to install: " +
                 (package != nullptr ? std::string(package->why) + " (" + package->source + ")"
                                     : "not in pcdino's table") +
                 "; pcdino installs no unpinned binary instead (OSes with a package: " + offered + ")");
    }
    if (s.custom_ami.empty())
      r.fail(at, "monitoring.prometheus",
             "needs image.custom_ami, the pcdino image (`pcdino ami`) that holds pcdino's alert rules and "
             "the compute nodes' node exporter");
    if (s.prometheus.s3_prefix.empty()) s.prometheus.s3_prefix = s.spank.s3_prefix;
    if (s.prometheus.s3_prefix.empty())
      r.fail(at, "monitoring.prometheus.s3_prefix",
             "missing: where commands.sh uploads head-node.sh (s3://bucket/prefix; spank.s3_prefix serves "
             "both when given)");
    if (s.spank.enabled && s.prometheus.s3_prefix != s.spank.s3_prefix)
      r.fail(at["s3_prefix"], "monitoring.prometheus.s3_prefix",
             "'" + s.prometheus.s3_prefix + "' is not spank.s3_prefix '" + s.spank.s3_prefix +
                 "': head-node.sh is one script, uploaded once");
  }

  const YAML::Node net = r.map(root, "network", "network", false);
  r.only(net, "network", {"head_subnet_id", "compute_subnet_id"});
  s.head_subnet_id = r.text(net, "head_subnet_id", "network.head_subnet_id", false,
                            R"(subnet-[0-9a-f]{8,17})", "a subnet id");
  s.compute_subnet_id = r.text(net, "compute_subnet_id", "network.compute_subnet_id", false,
                               R"(subnet-[0-9a-f]{8,17})", "a subnet id");
  if (s.head_subnet_id.empty() != s.compute_subnet_id.empty()) {
    r.fail(net, "network",
           "give both head_subnet_id and compute_subnet_id, or neither (a VPC stack is generated)");
  }
  return s;
}

SiteSpec load_site_spec(const std::string& path) {
  return parse_site_spec(read_file(path, "site spec"), path);
}

void check_image_spec(const SiteSpec& site, const std::string& image_release, const std::string& image_os,
                      const std::string& image_source) {
  if (image_release != site.parallelcluster_version || image_os != site.os) {
    throw ConfigError(site.source + ": image.ami_spec: " + image_source + " builds for ParallelCluster " +
                      image_release + " on " + image_os + ", the cluster is ParallelCluster " +
                      site.parallelcluster_version + " on " + site.os +
                      " (a custom AMI runs only with its own release's cookbook and OS)");
  }
}

}  // namespace pcdino::cluster
