#include "pcdino/cluster/generate.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "commands.hpp"
#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/cluster/containers.hpp"
#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/cluster/script_grants.hpp"
#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/slurm_features.hpp"
#include "pcdino/core/text_template.hpp"
#include "script_helpers.hpp"

namespace pcdino::cluster {

namespace {

YAML::Node seq(std::initializer_list<YAML::Node> items) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& i : items) n.push_back(i);
  return n;
}

YAML::Node ref(const std::string& id) {
  YAML::Node n;
  n["Ref"] = id;
  return n;
}

YAML::Node get_att(const std::string& id, const std::string& attribute) {
  YAML::Node n;
  n["Fn::GetAtt"] = seq({YAML::Node(id), YAML::Node(attribute)});
  return n;
}

YAML::Node name_tag(const std::string& name) {
  YAML::Node tag;
  tag["Key"] = "Name";
  tag["Value"] = name;
  return seq({tag});
}

std::string emit(const YAML::Node& node, const std::string& header) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  out << node;
  return header + out.c_str() + "\n";
}

YAML::Node s3_access(const S3AccessSpec& a) {
  YAML::Node n;
  n["BucketName"] = a.bucket;
  if (!a.key.empty()) n["KeyName"] = a.key;
  if (a.write) n["EnableWriteAccess"] = true;
  return n;
}

// "s3://bucket/key/prefix" -> {bucket, "key/prefix"}.
std::pair<std::string, std::string> s3_split(const std::string& url) {
  const std::string rest = url.substr(std::string("s3://").size());
  const auto slash = rest.find('/');
  return {rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
}

// A failed prolog requeues a job submitted with --no-requeue too (pcdino's stages but training are) only with
// ForceRequeueOnFail: the release's Slurm (core/parallelcluster.hpp) and the feature table decide.
std::string prolog_flags(const SiteSpec& s) {
  const parallelcluster::Release* release = parallelcluster::find_release(s.parallelcluster_version);
  const bool force = release != nullptr && pcdino::slurm::has(release->slurm, "force_requeue_on_fail");
  return force ? "Alloc,DeferBatch,ForceRequeueOnFail" : "Alloc,DeferBatch";
}

// The node check's slurm.conf lines (issue #60), none of them on ParallelCluster's deny list (Prolog is:
// head-node.sh puts the wrapper in prolog.d). The prolog runs at allocation, on every node, and the batch
// script starts only once all passed (PrologFlags=Alloc,DeferBatch: slurm.conf(5)); ParallelCluster already
// sets SchedulerParameters=nohold_on_prolog_fail, so a job whose prolog failed is requeued unheld. The
// health check runs on idle nodes, drained ones included (IDLE), so that it returns what pcdino drained.
// Slurm 25.11's START_ONLY (the feature table's health_check_start_only) runs it only when slurmd starts,
// which every release does anyway before slurmd registers: it would stop the periodic check that drains a
// node between jobs and returns it, so no release gets it.
std::vector<SlurmLine> node_check_settings(const SiteSpec& s) {
  return {{{"PrologFlags", prolog_flags(s)}},
          {{"HealthCheckProgram", kImageNodeCheckWrapper}},
          {{"HealthCheckInterval", std::to_string(s.node_check.interval_seconds)}},
          {{"HealthCheckNodeState", "IDLE"}}};
}

// The node check's site file: the spec's shared storage as ParallelCluster mounts it, the queues' local
// scratch.
NodeCheckSite node_check_site(const SiteSpec& s) {
  NodeCheckSite site;
  if (s.fsx.enabled) site.shared_storage.push_back({s.fsx.mount_dir, "FsxLustre"});
  if (s.apps_ebs_gib > 0) site.shared_storage.push_back({"/apps", "Ebs"});
  for (const auto& q : s.queues)
    if (!q.local_scratch.empty() && std::find(site.local_scratch.begin(), site.local_scratch.end(),
                                              q.local_scratch) == site.local_scratch.end())
      site.local_scratch.push_back(q.local_scratch);
  site.min_scratch_gib = s.node_check.min_scratch_gib;
  site.probe_seconds = s.node_check.probe_seconds;
  return site;
}

// A node's IAM: the site's policies and the buckets the pipeline reads or writes.
YAML::Node node_iam(const SiteSpec& s) {
  YAML::Node iam(YAML::NodeType::Map);
  for (const auto& arn : s.iam_policies) {
    YAML::Node p;
    p["Policy"] = arn;
    iam["AdditionalIamPolicies"].push_back(p);
  }
  for (const auto& a : s.s3_access) iam["S3Access"].push_back(s3_access(a));
  return iam;
}

// The compute nodes' IAM: a node's, and read access to the bucket of an s3:// custom action, which the
// default instance role lacks (it reads only ParallelCluster's own buckets).
YAML::Node compute_iam(const SiteSpec& s) {
  YAML::Node iam = node_iam(s);
  std::vector<S3AccessSpec> granted = s.s3_access;
  const auto grant = [&](const S3AccessSpec& script) {
    if (std::none_of(granted.begin(), granted.end(), [&](const S3AccessSpec& a) {
          return a.bucket == script.bucket && (a.key.empty() || a.key == script.key);
        })) {
      iam["S3Access"].push_back(s3_access(script));
      granted.push_back(script);
    }
  };
  if (s.on_node_configured.rfind("s3://", 0) == 0) grant({s3_split(s.on_node_configured).first, "", false});
  if (s.containers.enabled) {
    const auto [bucket, key] = s3_split(compute_node_script_url(s));
    grant({bucket, key, false});
  }
  return iam;
}

// A compute node's OnNodeConfigured: compute-node.sh with the queue's local scratch first where containers
// are on (the site's own script may use Enroot), then the site's script.
YAML::Node compute_custom_action(const SiteSpec& s, const QueueSpec& q) {
  YAML::Node site_script;
  if (!s.on_node_configured.empty()) site_script["Script"] = s.on_node_configured;
  if (!s.containers.enabled) return site_script;
  YAML::Node containers;
  containers["Script"] = compute_node_script_url(s);
  if (!q.local_scratch.empty()) containers["Args"] = seq({YAML::Node(q.local_scratch)});
  if (s.on_node_configured.empty()) return containers;
  YAML::Node action;
  action["Sequence"] = seq({containers, site_script});
  return action;
}

YAML::Node slurm_line(const SlurmLine& line) {
  YAML::Node n(YAML::NodeType::Map);
  for (const auto& [key, value] : line) n[key] = value;
  return n;
}

// The accelerator kind of an instance type's devices other than NVIDIA's GPUs (the catalogue's device
// model in core/accelerator.hpp's table), or nullptr: its name is also its SPANK profile's.
const AcceleratorKind* vendor_accelerator(const std::string& instance_type) {
  const InstanceType* t = find_instance(instance_type);
  return t != nullptr ? accelerator_of_device(t->gpu_model) : nullptr;
}

std::string cluster_config(const SiteSpec& s) {
  const bool own_network = s.head_subnet_id.empty();
  const std::string head_subnet = own_network ? "${PUBLIC_SUBNET_ID}" : s.head_subnet_id;
  const std::string compute_subnet = own_network ? "${PRIVATE_SUBNET_ID}" : s.compute_subnet_id;
  YAML::Node c;
  c["Region"] = s.region;
  c["Image"]["Os"] = s.os;
  if (!s.custom_ami.empty()) c["Image"]["CustomAmi"] = s.custom_ami;

  YAML::Node head;
  head["InstanceType"] = s.head_node_type;
  head["Networking"]["SubnetId"] = head_subnet;
  if (own_network)
    head["Networking"]["AdditionalSecurityGroups"] = seq({YAML::Node("${EFA_SECURITY_GROUP_ID}")});
  if (!s.key_name.empty()) head["Ssh"]["KeyName"] = s.key_name;
  head["Ssh"]["AllowedIps"] = s.ssh_allowed_cidr;
  head["Imds"]["Secured"] = true;
  if (s.head_root_volume_gib > 0) head["LocalStorage"]["RootVolume"]["Size"] = s.head_root_volume_gib;
  YAML::Node head_iam = node_iam(s);
  if (has_head_node_script(s)) {
    // ParallelCluster fetches an s3:// custom action with the node's role: read access to the script.
    const auto [bucket, key] = s3_split(head_node_script_url(s));
    head_iam["S3Access"].push_back(s3_access({bucket, key, false}));
    head["CustomActions"]["OnNodeConfigured"]["Script"] = head_node_script_url(s);
    // Run again after `pcluster update-cluster` (it is idempotent): the node check's site file then names
    // the updated SharedStorage, not the mounts the cluster was created with.
    head["CustomActions"]["OnNodeUpdated"]["Script"] = head_node_script_url(s);
  }
  if (head_iam.size() > 0) head["Iam"] = head_iam;
  c["HeadNode"] = head;

  YAML::Node scheduling;
  scheduling["Scheduler"] = "slurm";
  for (const auto& line : s.slurm_settings)
    scheduling["SlurmSettings"]["CustomSlurmSettings"].push_back(slurm_line(line));
  if (s.node_check.enabled)
    for (const auto& line : node_check_settings(s))
      scheduling["SlurmSettings"]["CustomSlurmSettings"].push_back(slurm_line(line));
  for (const auto& line : slurm_metrics_settings(s))  // for the head node's Prometheus (prometheus.hpp)
    scheduling["SlurmSettings"]["CustomSlurmSettings"].push_back(slurm_line(line));
  for (const auto& q : s.queues) {
    YAML::Node queue;
    queue["Name"] = q.name;
    queue["CapacityType"] = q.capacity_type;
    YAML::Node cr;
    cr["Name"] = compute_resource_name(q.instance_type);
    cr["InstanceType"] = q.instance_type;
    cr["MinCount"] = q.min_count;
    cr["MaxCount"] = q.max_count;
    if (!q.capacity_reservation_id.empty())
      cr["CapacityReservationTarget"]["CapacityReservationId"] = q.capacity_reservation_id;
    if (!q.capacity_reservation_resource_group_arn.empty())
      cr["CapacityReservationTarget"]["CapacityReservationResourceGroupArn"] =
          q.capacity_reservation_resource_group_arn;
    if (q.efa) cr["Efa"]["Enabled"] = true;
    queue["ComputeResources"].push_back(cr);
    // Slurm has no GRES for the devices of a kind without slurm_gres (ParallelCluster generates gres.conf for
    // NVIDIA GPUs only), so two jobs on one node would both see all of them: one job per node.
    if (const AcceleratorKind* kind = vendor_accelerator(q.instance_type);
        kind != nullptr && !kind->slurm_gres)
      queue["JobExclusiveAllocation"] = true;
    queue["Networking"]["SubnetIds"] = seq({YAML::Node(compute_subnet)});
    if (q.efa && own_network) {
      queue["Networking"]["AdditionalSecurityGroups"] = seq({YAML::Node("${EFA_SECURITY_GROUP_ID}")});
    }
    if (!q.placement_group.empty())
      queue["Networking"]["PlacementGroup"]["Enabled"] = q.placement_group != "false";
    if (q.placement_group != "true" && q.placement_group != "false" && !q.placement_group.empty())
      queue["Networking"]["PlacementGroup"]["Name"] = q.placement_group;
    if (!q.local_scratch.empty())
      queue["ComputeSettings"]["LocalStorage"]["EphemeralVolume"]["MountDir"] = q.local_scratch;
    if (q.root_volume_gib > 0)
      queue["ComputeSettings"]["LocalStorage"]["RootVolume"]["Size"] = q.root_volume_gib;
    if (!q.slurm_settings.empty()) queue["CustomSlurmSettings"] = slurm_line(q.slurm_settings);
    if (const YAML::Node iam = compute_iam(s); iam.size() > 0) queue["Iam"] = iam;
    if (const YAML::Node action = compute_custom_action(s, q); action.size() > 0)
      queue["CustomActions"]["OnNodeConfigured"] = action;
    scheduling["SlurmQueues"].push_back(queue);
  }
  c["Scheduling"] = scheduling;

  YAML::Node storage(YAML::NodeType::Sequence);
  if (s.fsx.enabled) {
    YAML::Node fsx;
    fsx["Name"] = "fsx";
    fsx["StorageType"] = "FsxLustre";
    fsx["MountDir"] = s.fsx.mount_dir;
    YAML::Node settings;
    if (!s.fsx.file_system_id.empty()) {
      settings["FileSystemId"] = s.fsx.file_system_id;
    } else {
      settings["StorageCapacity"] = s.fsx.capacity_gib;
      settings["DeploymentType"] = s.fsx.deployment_type;
      if (s.fsx.throughput_per_tib > 0) settings["PerUnitStorageThroughput"] = s.fsx.throughput_per_tib;
      // ParallelCluster knows only LZ4; no compression is the key left out.
      if (s.fsx.compression != "NONE") settings["DataCompressionType"] = s.fsx.compression;
      if (!s.fsx.import_path.empty()) settings["ImportPath"] = s.fsx.import_path;
      if (!s.fsx.export_path.empty()) settings["ExportPath"] = s.fsx.export_path;
    }
    fsx["FsxLustreSettings"] = settings;
    storage.push_back(fsx);
  }
  if (s.apps_ebs_gib > 0) {
    YAML::Node ebs;
    ebs["Name"] = "apps";
    ebs["StorageType"] = "Ebs";
    ebs["MountDir"] = "/apps";
    ebs["EbsSettings"]["VolumeType"] = "gp3";
    ebs["EbsSettings"]["Size"] = s.apps_ebs_gib;
    storage.push_back(ebs);
  }
  if (storage.size() > 0) c["SharedStorage"] = storage;
  c["Imds"]["ImdsSupport"] = "v2.0";
  c["Monitoring"]["Logs"]["CloudWatch"]["Enabled"] = s.logs;
  c["Monitoring"]["Dashboards"]["CloudWatch"]["Enabled"] = s.dashboards;
  if (!s.tags.empty()) {
    YAML::Node tags(YAML::NodeType::Sequence);
    for (const auto& [k, v] : s.tags) {
      YAML::Node t;
      t["Key"] = k;
      t["Value"] = v;
      tags.push_back(t);
    }
    c["Tags"] = tags;
  }
  return emit(c, "# ParallelCluster v3 configuration generated by `pcdino cluster generate`\n# from " +
                     std::filesystem::path(s.source).filename().string() +
                     ".\n# ${...} are outputs of network.yaml, filled in by commands.sh.\n---\n");
}

std::string network_stack(const SiteSpec& s) {
  YAML::Node t;
  t["AWSTemplateFormatVersion"] = "2010-09-09";
  t["Description"] = "pcdino cluster network: public and private subnet in one AZ";
  t["Parameters"]["AvailabilityZone"]["Type"] = "AWS::EC2::AvailabilityZone::Name";
  t["Parameters"]["AvailabilityZone"]["Default"] = s.availability_zone;
  YAML::Node r;
  r["Vpc"]["Type"] = "AWS::EC2::VPC";
  r["Vpc"]["Properties"]["CidrBlock"] = "10.0.0.0/16";
  r["Vpc"]["Properties"]["EnableDnsSupport"] = true;
  r["Vpc"]["Properties"]["EnableDnsHostnames"] = true;
  r["Vpc"]["Properties"]["Tags"] = name_tag(s.name + "-vpc");

  r["PublicSubnet"]["Type"] = "AWS::EC2::Subnet";
  r["PublicSubnet"]["Properties"]["VpcId"] = ref("Vpc");
  r["PublicSubnet"]["Properties"]["CidrBlock"] = "10.0.0.0/24";
  r["PublicSubnet"]["Properties"]["AvailabilityZone"] = ref("AvailabilityZone");
  r["PublicSubnet"]["Properties"]["MapPublicIpOnLaunch"] = true;
  r["PublicSubnet"]["Properties"]["Tags"] = name_tag(s.name + "-public");
  r["PrivateSubnet"]["Type"] = "AWS::EC2::Subnet";
  r["PrivateSubnet"]["Properties"]["VpcId"] = ref("Vpc");
  r["PrivateSubnet"]["Properties"]["CidrBlock"] = "10.0.16.0/20";
  r["PrivateSubnet"]["Properties"]["AvailabilityZone"] = ref("AvailabilityZone");
  r["PrivateSubnet"]["Properties"]["Tags"] = name_tag(s.name + "-private");

  r["InternetGateway"]["Type"] = "AWS::EC2::InternetGateway";
  r["GatewayAttachment"]["Type"] = "AWS::EC2::VPCGatewayAttachment";
  r["GatewayAttachment"]["Properties"]["VpcId"] = ref("Vpc");
  r["GatewayAttachment"]["Properties"]["InternetGatewayId"] = ref("InternetGateway");
  r["PublicRouteTable"]["Type"] = "AWS::EC2::RouteTable";
  r["PublicRouteTable"]["Properties"]["VpcId"] = ref("Vpc");
  r["PublicRoute"]["Type"] = "AWS::EC2::Route";
  r["PublicRoute"]["DependsOn"] = "GatewayAttachment";
  r["PublicRoute"]["Properties"]["RouteTableId"] = ref("PublicRouteTable");
  r["PublicRoute"]["Properties"]["DestinationCidrBlock"] = "0.0.0.0/0";
  r["PublicRoute"]["Properties"]["GatewayId"] = ref("InternetGateway");
  r["PublicSubnetRouteTableAssociation"]["Type"] = "AWS::EC2::SubnetRouteTableAssociation";
  r["PublicSubnetRouteTableAssociation"]["Properties"]["SubnetId"] = ref("PublicSubnet");
  r["PublicSubnetRouteTableAssociation"]["Properties"]["RouteTableId"] = ref("PublicRouteTable");

  r["NatEip"]["Type"] = "AWS::EC2::EIP";
  r["NatEip"]["DependsOn"] = "GatewayAttachment";
  r["NatEip"]["Properties"]["Domain"] = "vpc";
  r["NatGateway"]["Type"] = "AWS::EC2::NatGateway";
  r["NatGateway"]["Properties"]["AllocationId"] = get_att("NatEip", "AllocationId");
  r["NatGateway"]["Properties"]["SubnetId"] = ref("PublicSubnet");
  r["PrivateRouteTable"]["Type"] = "AWS::EC2::RouteTable";
  r["PrivateRouteTable"]["Properties"]["VpcId"] = ref("Vpc");
  r["PrivateRoute"]["Type"] = "AWS::EC2::Route";
  r["PrivateRoute"]["Properties"]["RouteTableId"] = ref("PrivateRouteTable");
  r["PrivateRoute"]["Properties"]["DestinationCidrBlock"] = "0.0.0.0/0";
  r["PrivateRoute"]["Properties"]["NatGatewayId"] = ref("NatGateway");
  r["PrivateSubnetRouteTableAssociation"]["Type"] = "AWS::EC2::SubnetRouteTableAssociation";
  r["PrivateSubnetRouteTableAssociation"]["Properties"]["SubnetId"] = ref("PrivateSubnet");
  r["PrivateSubnetRouteTableAssociation"]["Properties"]["RouteTableId"] = ref("PrivateRouteTable");

  // EFA needs all traffic between the nodes, both ways: an egress rule to 0.0.0.0/0 does not cover it.
  r["EfaSecurityGroup"]["Type"] = "AWS::EC2::SecurityGroup";
  r["EfaSecurityGroup"]["Properties"]["GroupDescription"] =
      "EFA: all protocols between members of this group";
  r["EfaSecurityGroup"]["Properties"]["VpcId"] = ref("Vpc");
  r["EfaIngressSelf"]["Type"] = "AWS::EC2::SecurityGroupIngress";
  r["EfaIngressSelf"]["Properties"]["GroupId"] = ref("EfaSecurityGroup");
  r["EfaIngressSelf"]["Properties"]["IpProtocol"] = "-1";
  r["EfaIngressSelf"]["Properties"]["SourceSecurityGroupId"] = ref("EfaSecurityGroup");
  r["EfaEgressSelf"]["Type"] = "AWS::EC2::SecurityGroupEgress";
  r["EfaEgressSelf"]["Properties"]["GroupId"] = ref("EfaSecurityGroup");
  r["EfaEgressSelf"]["Properties"]["IpProtocol"] = "-1";
  r["EfaEgressSelf"]["Properties"]["DestinationSecurityGroupId"] = ref("EfaSecurityGroup");

  r["S3Endpoint"]["Type"] = "AWS::EC2::VPCEndpoint";
  r["S3Endpoint"]["Properties"]["VpcId"] = ref("Vpc");
  r["S3Endpoint"]["Properties"]["VpcEndpointType"] = "Gateway";
  r["S3Endpoint"]["Properties"]["ServiceName"] = "com.amazonaws." + s.region + ".s3";
  r["S3Endpoint"]["Properties"]["RouteTableIds"] = seq({ref("PublicRouteTable"), ref("PrivateRouteTable")});

  r["FlowLogGroup"]["Type"] = "AWS::Logs::LogGroup";
  r["FlowLogGroup"]["Properties"]["RetentionInDays"] = 30;
  r["FlowLogRole"]["Type"] = "AWS::IAM::Role";
  YAML::Node statement;
  statement["Effect"] = "Allow";
  statement["Principal"]["Service"] = "vpc-flow-logs.amazonaws.com";
  statement["Action"] = "sts:AssumeRole";
  r["FlowLogRole"]["Properties"]["AssumeRolePolicyDocument"]["Version"] = "2012-10-17";
  r["FlowLogRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"] = seq({statement});
  YAML::Node logs;
  logs["Effect"] = "Allow";
  logs["Action"] = seq({YAML::Node("logs:CreateLogStream"), YAML::Node("logs:PutLogEvents"),
                        YAML::Node("logs:DescribeLogGroups"), YAML::Node("logs:DescribeLogStreams")});
  logs["Resource"] = get_att("FlowLogGroup", "Arn");
  YAML::Node policy;
  policy["PolicyName"] = "flow-logs";
  policy["PolicyDocument"]["Version"] = "2012-10-17";
  policy["PolicyDocument"]["Statement"] = seq({logs});
  r["FlowLogRole"]["Properties"]["Policies"] = seq({policy});
  r["FlowLog"]["Type"] = "AWS::EC2::FlowLog";
  r["FlowLog"]["Properties"]["ResourceId"] = ref("Vpc");
  r["FlowLog"]["Properties"]["ResourceType"] = "VPC";
  r["FlowLog"]["Properties"]["TrafficType"] = "ALL";
  r["FlowLog"]["Properties"]["LogDestinationType"] = "cloud-watch-logs";
  r["FlowLog"]["Properties"]["LogGroupName"] = ref("FlowLogGroup");
  r["FlowLog"]["Properties"]["DeliverLogsPermissionArn"] = get_att("FlowLogRole", "Arn");
  t["Resources"] = r;

  YAML::Node o;
  o["VpcId"]["Value"] = ref("Vpc");
  o["PublicSubnetId"]["Value"] = ref("PublicSubnet");
  o["PrivateSubnetId"]["Value"] = ref("PrivateSubnet");
  o["EfaSecurityGroupId"]["Value"] = ref("EfaSecurityGroup");
  t["Outputs"] = o;
  return emit(t, "# CloudFormation network stack generated by `pcdino cluster generate`\n# from " +
                     std::filesystem::path(s.source).filename().string() + ".\n---\n");
}

// The profile of jobs that name none: the site's choice, else from the queues' hardware (profile names of
// spank/examples/accel-profiles.yaml).
std::string default_profile(const SiteSpec& s) {
  if (!s.spank.default_profile.empty()) return s.spank.default_profile;
  // A site whose accelerator queues are all of one other kind takes that kind's profile, EFA or not;
  // with NVIDIA queues beside them the NVIDIA profile stays the default (jobs on the others choose theirs
  // with --accel-profile).
  std::set<std::string> vendors;
  bool nvidia = false;
  for (const auto& q : s.queues) {
    const AcceleratorKind* kind = vendor_accelerator(q.instance_type);
    const InstanceType* t = find_instance(q.instance_type);
    if (kind != nullptr) {
      vendors.insert(kind->name);
    } else if (t != nullptr && t->gpus > 0) {
      nvidia = true;
    }
  }
  if (vendors.size() == 1 && !nvidia) return *vendors.begin();
  bool gpus = false;
  for (const auto& q : s.queues) {
    if (q.efa) return "nvidia-efa";
    const InstanceType* t = find_instance(q.instance_type);
    gpus = gpus || (t != nullptr && t->gpus > 0);
  }
  return gpus ? "nvidia" : "cpu";
}

// ParallelCluster mounts /opt/slurm from the head node on every compute and login node, so what the image
// holds there is hidden; the head node installs it once for all. Slurm reads plugstack.conf at every
// launch: files are replaced by rename, and only when their content changes. 3.11.0 writes
// plugstack.conf (its include line) and a Pyxis link itself; 3.11.1 writes neither and keeps Pyxis's
// configuration in /opt/parallelcluster/examples (aws-parallelcluster-cookbook v3.11.0 and v3.11.1,
// cookbooks/aws-parallelcluster-slurm, pyxis configuration). Later releases were not read at their tags
// (none is readable here): the script fails, naming the file, where that example is missing.
// The script's head: what it does (@WHAT@), its variables (@VARS@) and the helpers of every section.
const char* const kHeadNodeHead = R"SH(#!/usr/bin/env bash
# Generated by `pcdino cluster generate` from @SPEC@: the head node's OnNodeConfigured action.
@WHAT@set -euo pipefail
PROG=head-node.sh
@VARS@)SH";

const char* const kSpankWhat =
    R"SH(# Installs pcdino's SPANK plugin from the pcdino image into /opt/slurm, which every node mounts from the
# head node, and makes Slurm load it through plugstack.conf. Idempotent: a second run rewrites nothing.
)SH";
// The variables of head-node.sh, each where a section that reads it is on.
const char* const kSlurmVars = R"SH(SLURM_PREFIX=${SLURM_PREFIX:-/opt/slurm}
etc=$SLURM_PREFIX/etc
# plugstack_include: plugstack.conf keeps whatever it holds and gains the include line once.
plugstack_include() {
  local include="include $etc/plugstack.conf.d/*" tmp
  if ! grep -qxF "$include" "$etc/plugstack.conf" 2>/dev/null; then
    tmp=$(mktemp)
    { cat "$etc/plugstack.conf" 2>/dev/null || true; echo "$include"; } >"$tmp"
    put "$tmp" "$etc/plugstack.conf" 0644
    rm -f "$tmp"
  fi
}
)SH";
const char* const kPcdinoVars = "PCDINO_PREFIX=${PCDINO_PREFIX:-/opt/pcdino}\n";
const char* const kSpankVars = R"SH(DEFAULT_PROFILE=@PROFILE@
plugin=$PCDINO_PREFIX/lib/slurm/spank_pcdino.so
profiles=$PCDINO_PREFIX/share/pcdino/spank/accel-profiles.yaml
)SH";
const char* const kContainersWhat =
    R"SH(# Turns on ParallelCluster's Pyxis (its example line, with container_scope=job) and sets up Enroot for
# containers (slurm.container_image); compute-node.sh sets up Enroot on the compute nodes.
)SH";
const char* const kPrometheusWhat =
    R"SH(# Installs Prometheus from the OS's package with a prometheus.yml that finds the compute nodes through
# EC2 and loads pcdino's rules from the pcdino image. Idempotent: a second run rewrites nothing.
)SH";

const char* const kSpankSection = R"SH(
[ -f "$plugin" ] || fail "no $plugin: the head node must run the pcdino image (image.custom_ami)"
[ -f "$profiles" ] || fail "no $profiles in the pcdino package"
[ -d "$etc" ] || fail "no $etc: not a ParallelCluster head node (or SLURM_PREFIX is wrong)"
mkdir -p "$SLURM_PREFIX/lib/slurm" "$etc/plugstack.conf.d"
put "$plugin" "$SLURM_PREFIX/lib/slurm/spank_pcdino.so" 0755
put "$profiles" "$etc/accel-profiles.yaml" 0644
put_text "required $SLURM_PREFIX/lib/slurm/spank_pcdino.so config=$etc/accel-profiles.yaml default=$DEFAULT_PROFILE" \
  "$etc/plugstack.conf.d/pcdino.conf"
plugstack_include
echo "$PROG: $etc/plugstack.conf loads spank_pcdino.so (default profile $DEFAULT_PROFILE)"
)SH";

const char* const kNodeCheckWhat =
    R"SH(# Installs pcdino's node check: its site file in /opt/slurm/etc/pcdino and the pcdino image's wrapper in
# ParallelCluster's prolog.d; slurm.conf (CustomSlurmSettings) runs the same wrapper as HealthCheckProgram.
)SH";
// prolog.d's scripts run in reverse alphabetical order and stop at the first that fails (slurm.conf(5),
// Prolog): 95_ runs before ParallelCluster's 90_pcluster_health_check_manager, so that a sick node fails in
// seconds, before the DCGM level 2 diagnostic of minutes that script runs on a queue with HealthChecks/Gpu
// enabled (off unless the configuration sets it; pcdino does not). The wrapper is the image's, on every
// node's own disk; the site file and the link live in /opt/slurm, which every node mounts from the head node.
const char* const kNodeCheckSection = R"SH(
wrapper=$PCDINO_PREFIX/libexec/pcdino/node-check  # slurm.conf's HealthCheckProgram: @WRAPPER@
[ -x "$wrapper" ] || fail "no $wrapper: the head node must run the pcdino image (image.custom_ami)"
[ -d "$etc/scripts/prolog.d" ] || fail "no $etc/scripts/prolog.d: ParallelCluster 3.6 or later makes it"
mkdir -p "$etc/pcdino"
put_text "$(cat <<'SITE'
@SITE@SITE
)" "$etc/pcdino/node-check.yaml"
if [ "$(readlink "$etc/scripts/prolog.d/95_pcdino_node_check" 2>/dev/null)" != "$wrapper" ]; then
  ln -sfn "$wrapper" "$etc/scripts/prolog.d/95_pcdino_node_check"
  echo "$PROG: wrote $etc/scripts/prolog.d/95_pcdino_node_check -> $wrapper"
fi
echo "$PROG: the node check runs as prolog (prolog.d) and HealthCheckProgram ($wrapper)"
)SH";

std::string head_node_script(const SiteSpec& s) {
  if (!has_head_node_script(s)) return "";
  const bool slurm = s.spank.enabled || s.node_check.enabled || s.containers.enabled;
  const bool pcdino = s.spank.enabled || s.node_check.enabled || s.prometheus.enabled;
  const std::map<std::string, std::string> v = {
      {"SPEC", std::filesystem::path(s.source).filename().string()},
      {"PROFILE", default_profile(s)},
      {"WRAPPER", kImageNodeCheckWrapper},
      {"SITE",
       write_node_check_site(node_check_site(s), "`pcdino cluster generate` from " +
                                                     std::filesystem::path(s.source).filename().string())},
      {"WHAT",
       std::string(s.spank.enabled ? kSpankWhat : "") + (s.containers.enabled ? kContainersWhat : "") +
           (s.prometheus.enabled ? kPrometheusWhat : "") + (s.node_check.enabled ? kNodeCheckWhat : "")},
      {"VARS", std::string(kScriptHelpers) + (slurm ? kSlurmVars : "") + (pcdino ? kPcdinoVars : "") +
                   (s.spank.enabled ? fill_template(kSpankVars, {{"PROFILE", default_profile(s)}}) : "")}};
  std::string script = fill_template(kHeadNodeHead, v);
  if (s.spank.enabled) script += fill_template(kSpankSection, v);
  script += containers_head_node_section(s);
  if (s.node_check.enabled) script += fill_template(kNodeCheckSection, v);
  return script + prometheus_head_node_section(s);
}

}  // namespace

std::string compute_resource_name(const std::string& instance_type) {
  std::string n = instance_type;
  std::replace(n.begin(), n.end(), '.', '-');
  return n;
}

ClusterFiles generate_cluster(const SiteSpec& spec) {
  check_script_grants(spec);  // parse_site_spec() refused these already; a spec built in code is checked here
  return {cluster_config(spec),   network_stack(spec),       commands_script(spec),
          head_node_script(spec), compute_node_script(spec), prometheus_config(spec)};
}

}  // namespace pcdino::cluster
