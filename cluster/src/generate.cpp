#include "pcdino/cluster/generate.hpp"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "commands.hpp"
#include "head_node.hpp"
#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/cluster/containers.hpp"
#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/cluster/script_grants.hpp"
#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/slurm_features.hpp"

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

}  // namespace

std::string compute_resource_name(const std::string& instance_type) {
  std::string n = instance_type;
  std::replace(n.begin(), n.end(), '.', '-');
  return n;
}

ClusterFiles generate_cluster(const SiteSpec& spec) {
  check_script_grants(spec);  // parse_site_spec() refused these already; a spec built in code is checked here
  return {cluster_config(spec),   network_stack(spec),       commands_script(spec),  teardown_script(spec),
          head_node_script(spec), compute_node_script(spec), prometheus_config(spec)};
}

std::vector<Finding> site_findings(const SiteSpec& spec, const std::string& today) {
  std::vector<Finding> out;
  if (const std::string note = parallelcluster::end_of_support_note(spec.os, today); !note.empty())
    out.push_back(
        {parallelcluster::past_end_of_support(spec.os, today) ? Severity::policy : Severity::warning,
         std::filesystem::path(spec.source).filename().string(), "image.os",
         note + "; alinux2023 is its successor", "pcdino/core/parallelcluster.hpp, operating systems"});
  return out;
}

namespace {

// The files of `pcdino cluster generate`, in the order they are moved into the output folder: commands.sh,
// which creates the cluster, last.
struct OutputFile {
  const char* name;
  std::string ClusterFiles::*content;
  bool script;
};
const OutputFile kOutputs[] = {
    {"cluster-config.yaml", &ClusterFiles::cluster_config, false},
    {"network.yaml", &ClusterFiles::network_stack, false},
    {"prometheus.yml", &ClusterFiles::prometheus_config, false},
    {"head-node.sh", &ClusterFiles::head_node_script, true},
    {"compute-node.sh", &ClusterFiles::compute_node_script, true},
    {"teardown.sh", &ClusterFiles::teardown, true},
    {"commands.sh", &ClusterFiles::commands, true},
};

}  // namespace

std::vector<std::string> write_cluster_files(const ClusterFiles& files, const std::string& out) {
  make_directories(out);
  std::string tmp = out + "/.generate.tmp.XXXXXX";
  if (::mkdtemp(tmp.data()) == nullptr)
    throw CantCreateError("cannot create a temporary folder in " + out + ": " + std::strerror(errno));
  std::vector<std::string> written;
  try {
    for (const auto& f : kOutputs) {
      const std::string& content = files.*f.content;
      if (content.empty()) continue;
      const std::string path = tmp + "/" + f.name;
      write_file_atomic(path, content);
      if (f.script && ::chmod(path.c_str(), 0755) != 0)
        throw CantCreateError("cannot make " + path + " executable: " + std::strerror(errno));
    }
    for (const auto& f : kOutputs) {
      const std::string target = out + "/" + f.name;
      if ((files.*f.content).empty()) {
        std::error_code ec;
        if (std::filesystem::remove(target, ec); ec)
          throw CantCreateError("cannot remove " + target + " of an earlier run: " + ec.message());
        continue;
      }
      rename_into_place(tmp + "/" + f.name, target);
      written.emplace_back(f.name);
    }
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(tmp, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return written;
}

}  // namespace pcdino::cluster
