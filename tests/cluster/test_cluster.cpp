#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/cluster/cost.hpp"
#include "pcdino/cluster/generate.hpp"
#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/cluster/script_grants.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/parallelcluster.hpp"

namespace pcdino::cluster {
namespace {

SiteSpec example(const std::string& name) {
  return load_site_spec(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/" + name);
}

// Findings as "path: message" lines.
std::string findings(const std::string& yaml, const ValidateOptions& o = {}) {
  std::string out;
  for (const auto& f : validate_cluster_config(yaml, "c.yaml", o))
    out += std::string(1, static_cast<char>(std::toupper(severity_name(f.severity)[0]))) + " " + f.path +
           ": " + f.message + "\n";
  return out;
}

// What parse_site_spec() says of `yaml`: its ConfigError's message, or "(accepted)".
std::string site_error(const std::string& yaml) {
  try {
    parse_site_spec(yaml, "s.yaml");
  } catch (const ConfigError& e) {
    return std::string(e.what());
  }
  return std::string("(accepted)");
}

// A valid configuration with one queue; `queue` and `extra` are spliced in.
std::string config(const std::string& queue_body, const std::string& extra = "",
                   const std::string& ssh = "    KeyName: k\n    AllowedIps: 203.0.113.0/24\n") {
  return "Region: us-west-2\nImage:\n  Os: alinux2\nImds:\n  ImdsSupport: v2.0\nHeadNode:\n  InstanceType: "
         "c5.xlarge\n  Networking:\n    SubnetId: subnet-aaaa1111\n  Ssh:\n" +
         ssh + "Scheduling:\n  Scheduler: slurm\n  SlurmQueues:\n    - Name: q\n" + queue_body + extra;
}

const char* const kPlainQueue =
    "      ComputeResources:\n        - Name: cr\n          InstanceType: g4dn.12xlarge\n          MinCount: "
    "0\n"
    "          MaxCount: 2\n      Networking:\n        SubnetIds: [subnet-bbbb2222]\n";

TEST(ClusterValidate, AValidConfigurationHasNoErrors) {
  EXPECT_EQ(findings(config(kPlainQueue)),
            "W Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled: "
            "g4dn.12xlarge supports EFA but it is not enabled: multi-node training uses TCP\n");
}

TEST(ClusterValidate, EfaOnlyOnSupportedTypesWithPlacementGroupAndOneSubnet) {
  const std::string efa_2xl =
      "      ComputeResources:\n        - Name: cr\n          InstanceType: g4dn.2xlarge\n          Efa:\n"
      "            Enabled: true\n      Networking:\n        SubnetIds: [subnet-bbbb2222]\n"
      "        PlacementGroup:\n          Enabled: true\n";
  EXPECT_NE(findings(config(efa_2xl))
                .find("E Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled: g4dn.2xlarge does not "
                      "support EFA"),
            std::string::npos);
  std::string efa_12xl = efa_2xl;
  efa_12xl.replace(efa_12xl.find("g4dn.2xlarge"), 12, "g4dn.12xlarge");
  EXPECT_EQ(findings(config(efa_12xl)), "");
  std::string no_pg = efa_12xl.substr(0, efa_12xl.find("        PlacementGroup"));
  EXPECT_NE(
      findings(config(no_pg))
          .find(
              "E Scheduling.SlurmQueues[0].Networking.PlacementGroup.Enabled: an EFA compute resource needs "
              "its placement group stated"),
      std::string::npos);
  std::string two_subnets = efa_12xl;
  two_subnets.replace(two_subnets.find("[subnet-bbbb2222]"), 17, "[subnet-bbbb2222, subnet-cccc3333]");
  EXPECT_NE(findings(config(two_subnets))
                .find("E Scheduling.SlurmQueues[0].ComputeResources[0].Efa.Enabled: EFA cannot be used in a "
                      "queue over several subnets"),
            std::string::npos);
}

// A capacity reservation with a placement group (ParallelCluster's
// PlacementGroupCapacityReservationValidator, online there): the group ParallelCluster makes cannot be the
// reservation's own, so it is warned of; the reservation's group named in the site spec becomes
// PlacementGroup.Name, which passes.
TEST(ClusterValidate, AReservationWantsItsOwnPlacementGroupNamed) {
  const std::string reserved =
      "      ComputeResources:\n        - Name: cr\n          InstanceType: g4dn.12xlarge\n          Efa:\n"
      "            Enabled: true\n          CapacityReservationTarget:\n            CapacityReservationId: "
      "cr-0123456789abcdef0\n      Networking:\n        SubnetIds: [subnet-bbbb2222]\n"
      "        PlacementGroup:\n          Enabled: true\n";
  EXPECT_EQ(
      findings(config(reserved)),
      "W Scheduling.SlurmQueues[0].Networking.PlacementGroup: a capacity reservation with the placement "
      "group ParallelCluster makes: a reservation made in a cluster placement group is refused unless "
      "that group is named (PlacementGroup.Name), and one in none may meet insufficient capacity "
      "outside it\n");
  EXPECT_EQ(findings(config(reserved + "          Name: p4d-reserved\n")), "");

  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24, key_name: k}\nqueues: [{name: q, instance_type: p4d.24xlarge, efa: true, "
      "capacity_reservation_id: cr-0123456789abcdef0, placement_group: ";
  const SiteSpec named = parse_site_spec(base + "p4d-reserved}]\n", "s.yaml");
  const YAML::Node pg = YAML::Load(
      generate_cluster(named).cluster_config)["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"];
  EXPECT_EQ(pg["Name"].as<std::string>(), "p4d-reserved");
  EXPECT_TRUE(pg["Enabled"].as<bool>());
  const YAML::Node off = YAML::Load(generate_cluster(parse_site_spec(base + "false}]\n", "s.yaml"))
                                        .cluster_config)["Scheduling"]["SlurmQueues"][0]["Networking"];
  EXPECT_FALSE(off["PlacementGroup"]["Enabled"].as<bool>());
  EXPECT_FALSE(off["PlacementGroup"]["Name"].IsDefined());
  EXPECT_NE(site_error(base + "'bad name'}]\n").find("queues[0].placement_group"), std::string::npos)
      << site_error(base + "'bad name'}]\n");
}

TEST(ClusterValidate, EphemeralVolumeNeedsInstanceStore) {
  const std::string eph =
      "      ComputeSettings:\n        LocalStorage:\n          EphemeralVolume:\n            MountDir: "
      "/scratch\n";
  std::string ebs_only = std::string(kPlainQueue) + eph;
  ebs_only.replace(ebs_only.find("g4dn.12xlarge"), 13, "p3.8xlarge");
  EXPECT_NE(findings(config(ebs_only))
                .find("W Scheduling.SlurmQueues[0].ComputeSettings.LocalStorage.EphemeralVolume: "
                      "EphemeralVolume needs instance store"),
            std::string::npos);
  EXPECT_EQ(findings(config(std::string(kPlainQueue) + eph)).find("EphemeralVolume"), std::string::npos);
}

TEST(ClusterValidate, FsxRulesPerDeploymentType) {
  const auto fsx = [](const std::string& settings) {
    return findings(config(kPlainQueue,
                           "SharedStorage:\n  - Name: fsx\n    StorageType: FsxLustre\n    MountDir: /fsx\n"
                           "    FsxLustreSettings:\n" +
                               settings));
  };
  const std::string p = "SharedStorage[0].FsxLustreSettings.";
  EXPECT_EQ(fsx("      StorageCapacity: 4800\n      DeploymentType: PERSISTENT_2\n      "
                "PerUnitStorageThroughput: 125\n")
                .find("E "),
            std::string::npos);
  EXPECT_NE(fsx("      StorageCapacity: 3000\n      DeploymentType: PERSISTENT_2\n      "
                "PerUnitStorageThroughput: 125\n")
                .find("E " + p +
                      "StorageCapacity: StorageCapacity 3000 GiB; PERSISTENT_2: 1200 or a multiple of 2400"),
            std::string::npos);
  EXPECT_NE(
      fsx("      StorageCapacity: 1200\n      DeploymentType: PERSISTENT_2\n      PerUnitStorageThroughput: "
          "200\n")
          .find("E " + p +
                "PerUnitStorageThroughput: PERSISTENT_2 SSD storage needs PerUnitStorageThroughput of 125, "
                "250, 500, 1000"),
      std::string::npos);
  EXPECT_NE(fsx("      StorageCapacity: 1200\n      DeploymentType: SCRATCH_2\n      "
                "PerUnitStorageThroughput: 200\n")
                .find("E " + p + "PerUnitStorageThroughput: SCRATCH_2 takes no"),
            std::string::npos);
  EXPECT_EQ(fsx("      StorageCapacity: 3600\n      DeploymentType: SCRATCH_1\n").find("E "),
            std::string::npos);
  EXPECT_NE(fsx("      StorageCapacity: 4800\n      DeploymentType: SCRATCH_1\n").find("multiple of 3600"),
            std::string::npos);
  EXPECT_NE(fsx("      StorageCapacity: 1200\n      DeploymentType: PERSISTENT_2\n      "
                "PerUnitStorageThroughput: 125\n"
                "      ImportPath: s3://b/p\n")
                .find("E " + p + "ImportPath: PERSISTENT_2 links S3 through DataRepositoryAssociations"),
            std::string::npos);
  // ParallelCluster's schema takes LZ4 only: FSx's NONE is refused there too (cluster_schema.py, v3.11.1).
  for (const char* comp : {"GZIP", "NONE"}) {
    EXPECT_NE(fsx(std::string("      StorageCapacity: 1200\n      DeploymentType: SCRATCH_2\n      "
                              "DataCompressionType: ") +
                  comp + "\n")
                  .find("E " + p + "DataCompressionType: '" + comp + "' is not one of LZ4"),
              std::string::npos)
        << comp;
  }
  EXPECT_EQ(
      fsx("      StorageCapacity: 1200\n      DeploymentType: SCRATCH_2\n      DataCompressionType: LZ4\n")
          .find("E "),
      std::string::npos);
  EXPECT_EQ(fsx("      FileSystemId: fs-0123456789abcdef0\n").find("E "), std::string::npos);
}

TEST(ClusterValidate, NamesCountsSubnetsImdsAndSsh) {
  std::string q = kPlainQueue;
  EXPECT_NE(findings(config(q).replace(config(q).find("- Name: q"), 9, "- Name: GPU_Queue"))
                .find("E Scheduling.SlurmQueues[0].Name: 'GPU_Queue' does not match the pattern"),
            std::string::npos);
  EXPECT_NE(findings(config(q).replace(config(q).find("- Name: q"), 9, "- Name: default"))
                .find("and not 'default'"),
            std::string::npos);
  EXPECT_NE(findings(config(q).replace(config(q).find("- Name: q"), 9, "- Name: " + std::string(26, 'a')))
                .find("E Scheduling.SlurmQueues[0].Name: longer than 25 characters"),
            std::string::npos);
  std::string counts = q;
  counts.replace(counts.find("MinCount: 0"), 11, "MinCount: 5");
  EXPECT_NE(findings(config(counts))
                .find("E Scheduling.SlurmQueues[0].ComputeResources[0].MinCount: MinCount 5 is greater than "
                      "MaxCount 2"),
            std::string::npos);
  std::string same_subnet = q;
  same_subnet.replace(same_subnet.find("subnet-bbbb2222"), 15, "subnet-aaaa1111");
  EXPECT_NE(
      findings(config(same_subnet))
          .find(
              "P Scheduling.SlurmQueues[0].Networking.SubnetIds[0]: compute nodes in the head node's subnet"),
      std::string::npos);
  std::string v1 = config(q);
  v1.replace(v1.find("ImdsSupport: v2.0"), 17, "ImdsSupport: v1.0");
  EXPECT_NE(findings(v1).find("P Imds.ImdsSupport: require IMDSv2"), std::string::npos);
  EXPECT_NE(findings(config(q, "", "    AllowedIps: 0.0.0.0/0\n"))
                .find("P HeadNode.Ssh.AllowedIps: SSH from anywhere"),
            std::string::npos);
  EXPECT_EQ(findings(config(q, "", "    KeyName: k\n    AllowedIps: 0.0.0.0/0\n"), {true, false, ""})
                .find("AllowedIps"),
            std::string::npos);
  EXPECT_NE(findings(config(q, "", "    KeyName: k\n")).find("P HeadNode.Ssh.AllowedIps: not set"),
            std::string::npos);
  // Positions: the finding names line and column of the offending value.
  const auto f =
      validate_cluster_config(config(q, "", "    KeyName: k\n    AllowedIps: 0.0.0.0/0\n"), "c.yaml");
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f.back().path, "HeadNode.Ssh.AllowedIps");
  EXPECT_EQ(f.back().where, "c.yaml:12:17");
}

// ParallelCluster 3.11.1: a CAPACITY_BLOCK compute resource has MinCount == MaxCount > 0
// (ComputeResourceSizeValidator) and a CapacityReservationId on itself or its queue (CapacityTypeValidator).
TEST(ClusterValidate, CapacityBlocksAreStaticAndReserved) {
  const std::string cr = "Scheduling.SlurmQueues[0].ComputeResources[0].";
  const auto block = [](const std::string& counts, const std::string& target) {
    return findings(
        config("      CapacityType: CAPACITY_BLOCK\n" + target +
               "      ComputeResources:\n        - Name: cr\n          InstanceType: c5.xlarge\n" + counts +
               "      Networking:\n        SubnetIds: [subnet-bbbb2222]\n"));
  };
  const std::string queue_target =
      "      CapacityReservationTarget:\n        CapacityReservationId: cr-0123456789abcdef0\n";
  const std::string four = "          MinCount: 4\n          MaxCount: 4\n";
  EXPECT_EQ(block(four, queue_target).find("E "), std::string::npos) << block(four, queue_target);
  EXPECT_NE(block("          MinCount: 0\n          MaxCount: 4\n", queue_target)
                .find("E " + cr + "MaxCount: a CAPACITY_BLOCK queue needs MaxCount equal to MinCount"),
            std::string::npos);
  EXPECT_NE(block("          MaxCount: 4\n", queue_target)
                .find("E " + cr + "MinCount: a CAPACITY_BLOCK queue needs MinCount > 0"),
            std::string::npos)
      << "MinCount defaults to 0";
  EXPECT_NE(
      block(four, "").find("E " + cr + "CapacityReservationTarget.CapacityReservationId: a CAPACITY_BLOCK"),
      std::string::npos);
  const std::string group =
      "      CapacityReservationTarget:\n        CapacityReservationResourceGroupArn: "
      "arn:aws:resource-groups:us-west-2:123456789012:group/g\n";
  EXPECT_NE(block(four, group).find("CapacityReservationId: a CAPACITY_BLOCK"), std::string::npos)
      << "a resource group does not name a block";
  // The same rules do not apply to on-demand queues.
  EXPECT_EQ(findings(config(kPlainQueue)).find("CAPACITY_BLOCK"), std::string::npos);
}

TEST(ClusterGenerate, P5SpecGivesAReservedCapacityBlockAndBucketAccess) {
  const YAML::Node c = YAML::Load(generate_cluster(example("p5-efa.yaml")).cluster_config);
  const YAML::Node p5 = c["Scheduling"]["SlurmQueues"][0];
  EXPECT_EQ(p5["CapacityType"].as<std::string>(), "CAPACITY_BLOCK");
  const YAML::Node cr = p5["ComputeResources"][0];
  EXPECT_EQ(cr["MinCount"].as<int>(), cr["MaxCount"].as<int>());
  EXPECT_GT(cr["MinCount"].as<int>(), 0);
  EXPECT_EQ(cr["CapacityReservationTarget"]["CapacityReservationId"].as<std::string>(),
            "cr-0123456789abcdef0");
  // The p4d queue draws on an on-demand capacity reservation.
  EXPECT_EQ(c["Scheduling"]["SlurmQueues"][1]["ComputeResources"][0]["CapacityReservationTarget"]
             ["CapacityReservationId"]
                 .as<std::string>(),
            "cr-0fedcba9876543210");
  // S3Access as "Bucket[/Key][ rw]" lines.
  const auto access = [](const YAML::Node& iam) {
    std::string out;
    for (const auto& a : iam["S3Access"])
      out += a["BucketName"].as<std::string>() + (a["KeyName"] ? "/" + a["KeyName"].as<std::string>() : "") +
             (a["EnableWriteAccess"] && a["EnableWriteAccess"].as<bool>() ? " rw" : "") + "\n";
    return out;
  };
  // The site's buckets on every node; the custom action's bucket (s3://research-bucket/...) on every queue
  // that runs it.
  // The head node also reads its own custom action, head-node.sh (the spank section).
  EXPECT_EQ(access(c["HeadNode"]["Iam"]),
            "research-datasets/fashion-mnist/*\nresearch-results "
            "rw\nresearch-bucket/pcluster/pcdino/head-node.sh\n");
  for (const auto& q : c["Scheduling"]["SlurmQueues"]) {
    // compute-node.sh (containers), then the site's own script.
    ASSERT_EQ(q["CustomActions"]["OnNodeConfigured"]["Sequence"][1]["Script"].as<std::string>(),
              "s3://research-bucket/pcluster/post-install.sh");
    EXPECT_EQ(access(q["Iam"]), "research-datasets/fashion-mnist/*\nresearch-results rw\nresearch-bucket\n")
        << q["Name"];
    EXPECT_EQ(q["ComputeSettings"]["LocalStorage"]["RootVolume"]["Size"].as<int>(), 200);
  }
  EXPECT_EQ(c["HeadNode"]["LocalStorage"]["RootVolume"]["Size"].as<int>(), 100);
}

// A bucket granted whole by the site is not granted again for the custom action.
TEST(ClusterGenerate, CustomActionBucketIsGrantedOnce) {
  SiteSpec s = example("p5-efa.yaml");
  s.s3_access = {{"research-bucket", "", false}};
  const YAML::Node c = YAML::Load(generate_cluster(s).cluster_config);
  EXPECT_EQ(c["Scheduling"]["SlurmQueues"][0]["Iam"]["S3Access"].size(), 1u);
  s.s3_access = {{"research-bucket", "data/*", false}};
  const YAML::Node d = YAML::Load(generate_cluster(s).cluster_config);
  EXPECT_EQ(d["Scheduling"]["SlurmQueues"][0]["Iam"]["S3Access"].size(), 2u) << "a key is not the script";
}

// The spank section: the head node's OnNodeConfigured and OnNodeUpdated action, uploaded by commands.sh
// before the cluster is created, installing the plugin from the pcdino image into /opt/slurm.
TEST(ClusterGenerate, SpankSectionGivesTheHeadNodeItsAction) {
  const SiteSpec site = example("p5-efa.yaml");
  const ClusterFiles files = generate_cluster(site);
  const YAML::Node c = YAML::Load(files.cluster_config);
  EXPECT_EQ(c["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Script"].as<std::string>(),
            "s3://research-bucket/pcluster/pcdino/head-node.sh");
  EXPECT_EQ(c["HeadNode"]["CustomActions"]["OnNodeUpdated"]["Script"].as<std::string>(),
            "s3://research-bucket/pcluster/pcdino/head-node.sh")
      << "run again after update-cluster: the node check's site file follows SharedStorage";
  const std::string& sh = files.head_node_script;
  EXPECT_NE(sh.find("DEFAULT_PROFILE=nvidia-efa\n"), std::string::npos) << "an EFA queue: the EFA profile";
  EXPECT_NE(sh.find(R"(pyxis="$pyxis container_scope=job")"), std::string::npos)
      << "containers: Pyxis, job scope";
  EXPECT_NE(sh.find(R"(local include="include $etc/plugstack.conf.d/*")"), std::string::npos);
  EXPECT_NE(sh.find("required $SLURM_PREFIX/lib/slurm/spank_pcdino.so config=$etc/accel-profiles.yaml"),
            std::string::npos);
  const auto upload = files.commands.find(
      "aws s3 cp --region \"$REGION\" head-node.sh "
      "s3://research-bucket/pcluster/pcdino/head-node.sh\n");
  ASSERT_NE(upload, std::string::npos) << files.commands;
  EXPECT_LT(upload, files.commands.find("create --dryrun true")) << "uploaded before the cluster exists";
  // The default profile follows the queues' hardware; the site's choice wins.
  SiteSpec gpu = site;
  for (auto& q : gpu.queues) q.efa = false;
  EXPECT_NE(generate_cluster(gpu).head_node_script.find("DEFAULT_PROFILE=nvidia\n"), std::string::npos);
  // Gaudi and Trainium queues take their vendor's profile, EFA or not.
  SiteSpec vendor = site;
  for (const auto& [type, profile] :
       {std::pair{"dl1.24xlarge", "habana"}, std::pair{"trn1.32xlarge", "neuron"}}) {
    for (auto& q : vendor.queues) q.instance_type = type;
    const ClusterFiles f = generate_cluster(vendor);
    EXPECT_NE(f.head_node_script.find(std::string("DEFAULT_PROFILE=") + profile + "\n"), std::string::npos)
        << type;
    // No GRES for their devices: one job per node, a key ParallelCluster's schema knows.
    EXPECT_TRUE(
        YAML::Load(f.cluster_config)["Scheduling"]["SlurmQueues"][0]["JobExclusiveAllocation"].as<bool>());
    for (const auto& finding : validate_cluster_config(f.cluster_config, "c.yaml"))
      EXPECT_EQ(finding.path.find("JobExclusiveAllocation"), std::string::npos) << finding.message;
  }
  // Beside an NVIDIA queue, the NVIDIA profile stays the default.
  SiteSpec mixed = site;
  mixed.queues.push_back(mixed.queues[0]);
  mixed.queues.back().name = "gaudi";
  mixed.queues.back().instance_type = "dl1.24xlarge";
  EXPECT_NE(generate_cluster(mixed).head_node_script.find("DEFAULT_PROFILE=nvidia-efa\n"), std::string::npos);
  gpu.spank.default_profile = "cpu";
  EXPECT_NE(generate_cluster(gpu).head_node_script.find("DEFAULT_PROFILE=cpu\n"), std::string::npos);
  // Without the section there is no script and no head-node action.
  SiteSpec plain = site;
  plain.spank = {};
  plain.node_check = {};
  plain.containers = {};
  EXPECT_EQ(generate_cluster(plain).head_node_script, "");
  EXPECT_EQ(generate_cluster(plain).compute_node_script, "");
  EXPECT_FALSE(YAML::Load(generate_cluster(plain).cluster_config)["HeadNode"]["CustomActions"].IsDefined());
}

// monitoring.prometheus: head-node.sh installs Prometheus, whose prometheus.yml finds the compute nodes by
// ParallelCluster's own tags and loads pcdino's rules; the configuration stays ParallelCluster's.
TEST(ClusterGenerate, PrometheusOnTheHeadNode) {
  SiteSpec site = example("p5-efa.yaml");
  site.prometheus = {true, "30d", site.spank.s3_prefix};
  const ClusterFiles files = generate_cluster(site);
  EXPECT_EQ(findings(files.cluster_config, {false, true, ""}), "") << "schema and validators, as a template";
  const YAML::Node c = YAML::Load(files.cluster_config);
  EXPECT_EQ(c["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Script"].as<std::string>(),
            "s3://research-bucket/pcluster/pcdino/head-node.sh");
  const std::string& sh = files.head_node_script;
  EXPECT_NE(sh.find("spank_pcdino.so"), std::string::npos) << "the spank part stays";
  EXPECT_NE(sh.find("apt-get install -y -q prometheus\n"), std::string::npos);
  EXPECT_NE(sh.find("--storage.tsdb.retention.time=30d"), std::string::npos);
  EXPECT_NE(sh.find("/opt/parallelcluster/scripts/imds/imds-access.sh}"), std::string::npos) << sh;
  EXPECT_NE(sh.find(R"(bash "$IMDS_ACCESS" --allow prometheus)"), std::string::npos) << sh;
  EXPECT_NE(sh.find(files.prometheus_config.substr(files.prometheus_config.find("scrape_configs:"))),
            std::string::npos)
      << "head-node.sh writes the generated prometheus.yml";

  const YAML::Node p = YAML::Load(files.prometheus_config);
  EXPECT_EQ(p["rule_files"][0].as<std::string>(), "/opt/pcdino/share/pcdino/monitoring/rules/*.yml");
  const YAML::Node node = p["scrape_configs"][1];
  EXPECT_EQ(node["job_name"].as<std::string>(), "node");
  const YAML::Node sd = node["ec2_sd_configs"][0];
  EXPECT_EQ(sd["region"].as<std::string>(), "us-east-1");
  EXPECT_EQ(sd["port"].as<int>(), 9100);
  std::map<std::string, std::string> filters;
  for (const auto& f : sd["filters"]) filters[f["name"].as<std::string>()] = f["values"][0].as<std::string>();
  EXPECT_EQ(filters, (std::map<std::string, std::string>{{"tag:parallelcluster:cluster-name", "dino-p5"},
                                                         {"tag:parallelcluster:node-type", "Compute"},
                                                         {"instance-state-name", "running"}}));
  EXPECT_EQ(node["relabel_configs"][0]["source_labels"][0].as<std::string>(), "__meta_ec2_private_dns_name");
  EXPECT_EQ(node["relabel_configs"][0]["target_label"].as<std::string>(), "instance");
  // dcgm-exporter's job: the same nodes on :9400, the same instance label (the dashboard joins on it), and
  // only the instance types with NVIDIA GPUs.
  const YAML::Node dcgm = p["scrape_configs"][2];
  EXPECT_EQ(dcgm["job_name"].as<std::string>(), "dcgm");
  EXPECT_EQ(dcgm["ec2_sd_configs"][0]["port"].as<int>(), 9400);
  EXPECT_EQ(YAML::Dump(dcgm["ec2_sd_configs"][0]["filters"]), YAML::Dump(sd["filters"]));
  EXPECT_EQ(dcgm["relabel_configs"][0]["target_label"].as<std::string>(), "instance");
  const auto kept = [&](const std::string& type) {
    bool keep = false, drop = false;
    for (const auto& rule : dcgm["relabel_configs"]) {
      if (!rule["action"]) continue;
      const bool match = std::regex_match(type, std::regex(rule["regex"].as<std::string>()));
      keep = keep || (rule["action"].as<std::string>() == "keep" && match);
      drop = drop || (rule["action"].as<std::string>() == "drop" && match);
    }
    return keep && !drop;
  };
  for (const char* gpu : {"p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "g5.12xlarge",
                          "g6e.xlarge", "g4dn.12xlarge"})
    EXPECT_TRUE(kept(gpu)) << gpu;
  for (const char* other : {"c5.4xlarge", "m6i.large", "g4ad.xlarge", "hpc7g.16xlarge", "trn1.32xlarge"})
    EXPECT_FALSE(kept(other)) << other;

  // Prometheus alone: a script without the plugin's part, uploaded to its own prefix.
  SiteSpec alone = site;
  alone.spank = {};
  alone.prometheus.s3_prefix = "s3://bkt/mon";
  const ClusterFiles a = generate_cluster(alone);
  EXPECT_EQ(a.head_node_script.find("spank_pcdino"), std::string::npos);
  EXPECT_NE(a.head_node_script.find("PCDINO_PREFIX=${PCDINO_PREFIX:-/opt/pcdino}\n"), std::string::npos);
  EXPECT_NE(a.commands.find("head-node.sh s3://bkt/mon/head-node.sh\n"), std::string::npos) << a.commands;
  EXPECT_EQ(YAML::Load(a.cluster_config)["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Script"]
                .as<std::string>(),
            "s3://bkt/mon/head-node.sh");
  EXPECT_EQ(findings(a.cluster_config, {false, true, ""}), "");
  // Off: nothing.
  EXPECT_EQ(generate_cluster(example("p5-efa.yaml")).prometheus_config, "");
}

// Slurm's own metrics (issue #62): where the release's Slurm is 25.11 or newer (core/parallelcluster.hpp's
// table) and monitoring.prometheus is on, slurm.conf gets MetricsType=metrics/openmetrics and prometheus.yml
// a job per slurmctld endpoint on the head node's SlurmctldPort; other releases, a site without Prometheus
// or with its own PrivateData get neither.
TEST(ClusterGenerate, SlurmMetricsFromSlurm2511) {
  const auto metrics_type = [](const ClusterFiles& f) {
    std::vector<std::string> values;
    for (const auto& line :
         YAML::Load(f.cluster_config)["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"])
      if (line["MetricsType"]) values.push_back(line["MetricsType"].as<std::string>());
    return values;
  };
  const auto slurm_jobs = [](const ClusterFiles& f) {
    std::map<std::string, std::string> jobs;  // job name -> "interval path target"
    if (f.prometheus_config.empty()) return jobs;
    for (const auto& job : YAML::Load(f.prometheus_config)["scrape_configs"]) {
      const std::string name = job["job_name"].as<std::string>();
      if (name.rfind("slurm", 0) != 0) continue;
      jobs[name] = job["scrape_interval"].as<std::string>() + " " + job["metrics_path"].as<std::string>() +
                   " " + job["static_configs"][0]["targets"][0].as<std::string>();
    }
    return jobs;
  };
  SiteSpec site = example("p5-efa.yaml");
  ASSERT_EQ(site.parallelcluster_version, "3.16.3") << "Slurm 25.11.8";
  site.prometheus = {true, "30d", site.spank.s3_prefix};
  const ClusterFiles on = generate_cluster(site);
  EXPECT_EQ(metrics_type(on), std::vector<std::string>{"metrics/openmetrics"});
  EXPECT_EQ(findings(on.cluster_config, {false, true, ""}), "") << "on none of ParallelCluster's deny lists";
  EXPECT_EQ(slurm_jobs(on), (std::map<std::string, std::string>{
                                {"slurm-nodes", "30s /metrics/nodes localhost:6820"},
                                {"slurm-jobs", "30s /metrics/jobs localhost:6820"},
                                {"slurm-partitions", "30s /metrics/partitions localhost:6820"},
                                {"slurm-scheduler", "30s /metrics/scheduler localhost:6820"}}));
  EXPECT_EQ(YAML::Load(on.prometheus_config)["scrape_configs"][1]["job_name"].as<std::string>(), "node")
      << "appended after the compute nodes' jobs";
  EXPECT_NE(on.head_node_script.find("metrics_path: /metrics/nodes"), std::string::npos)
      << "head-node.sh writes them";
  // Each path is one slurmctld 25.11.7 lists (a real GET /metrics, tests/monitoring/fixtures/slurm-25.11.7).
  std::ifstream index(std::string(PCDINO_SOURCE_DIR) +
                      "/tests/monitoring/fixtures/slurm-25.11.7/metrics-index.txt");
  const std::string listed((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  ASSERT_NE(listed.find("slurmctld"), std::string::npos);
  for (const auto& e : slurm_metrics_endpoints())
    EXPECT_NE(listed.find(std::string("'") + e.path + "'"), std::string::npos) << e.path;
  EXPECT_EQ(slurm_metrics_endpoints().size(), 4u) << "all but /metrics/jobs-users-accts";

  for (const char* release : {"3.15.1", "3.16.0"}) {  // Slurm 25.11.4, 25.11.6
    SiteSpec s = site;
    s.parallelcluster_version = release;
    EXPECT_EQ(metrics_type(generate_cluster(s)).size(), 1u) << release;
    EXPECT_EQ(slurm_jobs(generate_cluster(s)).size(), 4u) << release;
  }
  // Slurm 24.11.6 refuses the key; 3.15.0's Slurm is unknown to the table; no Prometheus, no reader.
  for (const char* release : {"3.14.0", "3.15.0", "3.11.1"}) {
    SiteSpec s = site;
    s.parallelcluster_version = release;
    EXPECT_EQ(metrics_type(generate_cluster(s)).size(), 0u) << release;
    EXPECT_EQ(slurm_jobs(generate_cluster(s)).size(), 0u) << release;
    EXPECT_NE(generate_cluster(s).prometheus_config, "") << release << ": Prometheus stays";
  }
  SiteSpec off = site;
  off.prometheus = {};
  EXPECT_EQ(metrics_type(generate_cluster(off)).size(), 0u);
  EXPECT_EQ(metrics_type(generate_cluster(example("p5-efa.yaml"))).size(), 0u)
      << "the example has no Prometheus";
  // A site's own PrivateData: slurmctld would answer 401.
  SiteSpec private_data = site;
  private_data.slurm_settings.push_back({{"PrivateData", "jobs"}});
  EXPECT_EQ(metrics_type(generate_cluster(private_data)).size(), 0u);
  EXPECT_EQ(slurm_jobs(generate_cluster(private_data)).size(), 0u);
}

// monitoring.prometheus is refused, with its line and column, where it cannot work.
TEST(ClusterSite, PrometheusKeyRefusals) {
  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24}\nqueues: [{name: q, instance_type: c5.xlarge}]\n";
  const std::string image = "image: {os: ubuntu2204, custom_ami: ami-0123456789abcdef0}\n";
  const auto error = site_error;
  const SiteSpec on = parse_site_spec(
      base + image + "spank: {s3_prefix: s3://bkt/p}\nmonitoring: {prometheus: true}\n", "s.yaml");
  EXPECT_TRUE(on.prometheus.enabled);
  EXPECT_EQ(on.prometheus.retention, "15d");
  EXPECT_EQ(on.prometheus.s3_prefix, "s3://bkt/p") << "spank's prefix serves both";
  EXPECT_FALSE(parse_site_spec(base, "s.yaml").prometheus.enabled);
  std::string e =
      error(base + image + "monitoring: {prometheus: {retention: 15 days, s3_prefix: s3://bkt/p}}\n");
  EXPECT_NE(e.find("monitoring.prometheus.retention: expected a Prometheus retention like 15d"),
            std::string::npos)
      << e;
  e = error(base + image + "monitoring: {prometheus: {retention: 15d, port: 9090}}\n");
  EXPECT_NE(e.find("monitoring.prometheus.port"), std::string::npos) << e;
  e = error(base + image + "monitoring: {prometheus: yes please}\n");
  EXPECT_NE(e.find("monitoring.prometheus"), std::string::npos) << e;
  e = error(base + "image: {os: alinux2023, custom_ami: ami-0123456789abcdef0}\n" +
            "monitoring:\n  prometheus: {s3_prefix: s3://bkt/p}\n");
  EXPECT_NE(
      e.find("s.yaml:8:15: monitoring.prometheus: the head node (image.os alinux2023) has no Prometheus "
             "package to install: Amazon Linux 2023's repositories have no Prometheus server"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("pcdino installs no unpinned binary instead (OSes with a package: ubuntu2204)"),
            std::string::npos)
      << e;
  e = error(base + "image: {os: ubuntu2204}\nmonitoring: {prometheus: {s3_prefix: s3://bkt/p}}\n");
  EXPECT_NE(e.find("monitoring.prometheus: needs image.custom_ami"), std::string::npos) << e;
  e = error(base + image + "monitoring: {prometheus: true}\n");
  EXPECT_NE(e.find("monitoring.prometheus.s3_prefix: missing"), std::string::npos) << e;
  e = error(base + image +
            "monitoring: {prometheus: {s3_prefix: s3://bkt/p}}\nslurm: {settings: [{MetricsType: "
            "metrics/none}]}\n");
  EXPECT_NE(
      e.find("monitoring.prometheus: slurm.settings sets MetricsType, which monitoring.prometheus sets"),
      std::string::npos)
      << e;
  e = error(base + image +
            "spank: {s3_prefix: s3://bkt/p}\nmonitoring: {prometheus: {s3_prefix: s3://bkt/q}}\n");
  EXPECT_NE(e.find("'s3://bkt/q' is not spank.s3_prefix 's3://bkt/p': head-node.sh is one script"),
            std::string::npos)
      << e;
}

// node_check (issue #60): the image's wrapper becomes ParallelCluster's prolog (prolog.d, by head-node.sh)
// and the HealthCheckProgram (CustomSlurmSettings, at allocation); its site file names the spec's shared
// storage and local scratch. Refused without the pcdino image, with another head-node.sh prefix, or with
// slurm.settings that would undo it.
TEST(ClusterSite, NodeCheckWiresThePrologAndTheHealthCheck) {
  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24, key_name: k}\nqueues: [{name: q, instance_type: p4d.24xlarge, efa: true, "
      "placement_group: "
      "true, local_scratch: /scratch}]\nstorage: {fsx: {capacity_gib: 1200}}\n";
  const std::string image = "image: {os: ubuntu2204, custom_ami: ami-0123456789abcdef0}\n";
  const auto error = site_error;
  const SiteSpec site = parse_site_spec(
      base + image + "node_check: {s3_prefix: s3://bkt/p, interval_seconds: 120}\n", "s.yaml");
  ASSERT_TRUE(site.node_check.enabled);
  const ClusterFiles files = generate_cluster(site);
  const YAML::Node settings =
      YAML::Load(files.cluster_config)["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"];
  std::map<std::string, std::string> lines;
  for (const auto& line : settings)
    for (const auto& kv : line) lines[kv.first.as<std::string>()] = kv.second.as<std::string>();
  EXPECT_EQ(lines["PrologFlags"], "Alloc,DeferBatch,ForceRequeueOnFail")
      << "Slurm 25.11: a --no-requeue job is requeued too";
  EXPECT_EQ(lines["HealthCheckProgram"], "/opt/pcdino/libexec/pcdino/node-check");
  EXPECT_EQ(lines["HealthCheckInterval"], "120");
  EXPECT_EQ(lines["HealthCheckNodeState"], "IDLE");
  EXPECT_EQ(lines.count("Prolog"), 0u) << "Prolog is on ParallelCluster's deny list: prolog.d instead";
  const YAML::Node head = YAML::Load(files.cluster_config)["HeadNode"];
  EXPECT_EQ(head["CustomActions"]["OnNodeConfigured"]["Script"].as<std::string>(), "s3://bkt/p/head-node.sh");
  const std::string& sh = files.head_node_script;
  EXPECT_NE(sh.find(R"(ln -sfn "$wrapper" "$etc/scripts/prolog.d/95_pcdino_node_check")"), std::string::npos)
      << sh;
  // The site file in head-node.sh is what the node check reads back.
  const auto from = sh.find("<<'SITE'\n") + 8, to = sh.find("SITE\n)\"", from);
  const NodeCheckSite read = parse_node_check_site(sh.substr(from, to - from), "head-node.sh");
  ASSERT_EQ(read.shared_storage.size(), 1u);
  EXPECT_EQ(read.shared_storage[0].mount_dir, "/fsx");
  EXPECT_EQ(read.shared_storage[0].storage_type, "FsxLustre");
  EXPECT_EQ(read.local_scratch, std::vector<std::string>{"/scratch"});
  EXPECT_EQ(findings(files.cluster_config, {false, true, ""}), "")
      << "ParallelCluster's schema and deny list accept it";

  std::string e = error(base + "image: {os: ubuntu2204}\nnode_check: {s3_prefix: s3://bkt/p}\n");
  EXPECT_NE(e.find("node_check: needs image.custom_ami"), std::string::npos) << e;
  e = error(base + image + "node_check: true\n");
  EXPECT_NE(e.find("node_check.s3_prefix: missing"), std::string::npos) << e;
  e = error(base + image + "spank: {s3_prefix: s3://bkt/p}\nnode_check: {s3_prefix: s3://bkt/q}\n");
  EXPECT_NE(e.find("node_check.s3_prefix: 's3://bkt/q' is not spank.s3_prefix 's3://bkt/p'"),
            std::string::npos)
      << e;
  EXPECT_TRUE(parse_site_spec(base + image + "spank: {s3_prefix: s3://bkt/p}\nnode_check: true\n", "s.yaml")
                  .node_check.s3_prefix == "s3://bkt/p")
      << "spank's prefix serves both";
  // The first prefix given serves every head-node.sh section, one read before it included.
  const SiteSpec later = parse_site_spec(
      base + image +
          "monitoring: {prometheus: true}\nnode_check: {s3_prefix: s3://bkt/n}\ncontainers: true\n",
      "s.yaml");
  EXPECT_EQ(later.prometheus.s3_prefix, "s3://bkt/n");
  EXPECT_EQ(later.containers.s3_prefix, "s3://bkt/n");
  EXPECT_EQ(head_node_s3_prefix(later), "s3://bkt/n");
  e = error(base + image +
            "monitoring: {prometheus: {s3_prefix: s3://bkt/m}}\nnode_check: {s3_prefix: s3://bkt/n}\n");
  EXPECT_NE(e.find("node_check.s3_prefix: 's3://bkt/n' is not monitoring.prometheus.s3_prefix 's3://bkt/m'"),
            std::string::npos)
      << e;
  e = error(base + image +
            "node_check: {s3_prefix: s3://bkt/p}\nslurm: {settings: [{HealthCheckInterval: 60}]}\n");
  EXPECT_NE(e.find("slurm.settings sets HealthCheckInterval, which the node check sets"), std::string::npos)
      << e;
  e = error(base + image +
            "node_check: {s3_prefix: s3://bkt/p}\nslurm: {settings: [{SchedulerParameters: bf_continue}]}\n");
  EXPECT_NE(e.find("replaces ParallelCluster's nohold_on_prolog_fail"), std::string::npos) << e;
  EXPECT_EQ(error(base + image +
                  "node_check: {s3_prefix: s3://bkt/p}\n"
                  "slurm: {settings: [{SchedulerParameters: 'nohold_on_prolog_fail,bf_continue'}]}\n"),
            "(accepted)");
  e = error(base + image + "node_check: {s3_prefix: s3://bkt/p, interval_seconds: 5}\n");
  EXPECT_NE(e.find("node_check.interval_seconds"), std::string::npos) << e;
}

// containers (issue #63): on ParallelCluster's official image (no pcdino image), head-node.sh turns Pyxis on
// from the example with container_scope=job, and each queue runs compute-node.sh with its local scratch,
// before the site's own OnNodeConfigured script (a Sequence), with read access to it; the configuration
// passes the schema (a Sequence has no Script of its own). Refused before 3.11.1, without an s3_prefix, with
// another head-node.sh prefix; spank.pyxis, Pyxis's old key, is refused with where it went.
TEST(ClusterSite, ContainersTurnPyxisOnAndSetUpEnrootPerQueue) {
  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24, key_name: k}\nqueues: [{name: gpu, instance_type: p4d.24xlarge, "
      "efa: true, placement_group: true, local_scratch: /scratch}, {name: cpu, instance_type: c5.xlarge}]\n";
  const std::string official = base + "image: {os: ubuntu2204}\n";
  const auto error = site_error;
  // The schema's errors only (the template's ${...} placeholders allowed).
  const auto expect_no_errors = [](const std::string& config) {
    const std::string all = findings(config, {false, true, "3.16.3"});
    EXPECT_EQ(all.find("E "), std::string::npos) << all;
  };
  const SiteSpec site = parse_site_spec(official + "containers: {s3_prefix: s3://bkt/p/}\n", "s.yaml");
  ASSERT_TRUE(site.containers.enabled);
  EXPECT_EQ(site.containers.s3_prefix, "s3://bkt/p");
  const ClusterFiles files = generate_cluster(site);
  EXPECT_NE(files.head_node_script.find("container_scope=job"), std::string::npos);
  EXPECT_EQ(files.head_node_script.find("spank_pcdino"), std::string::npos)
      << "no pcdino image: no plugin part";
  EXPECT_NE(files.compute_node_script.find("enroot_setup \"$SCRATCH\""), std::string::npos);
  EXPECT_NE(files.commands.find("compute-node.sh s3://bkt/p/compute-node.sh"), std::string::npos)
      << files.commands;
  YAML::Node config = YAML::Load(files.cluster_config);
  EXPECT_EQ(config["HeadNode"]["CustomActions"]["OnNodeConfigured"]["Script"].as<std::string>(),
            "s3://bkt/p/head-node.sh");
  const YAML::Node gpu = config["Scheduling"]["SlurmQueues"][0];
  EXPECT_EQ(gpu["CustomActions"]["OnNodeConfigured"]["Script"].as<std::string>(),
            "s3://bkt/p/compute-node.sh");
  EXPECT_EQ(gpu["CustomActions"]["OnNodeConfigured"]["Args"][0].as<std::string>(), "/scratch");
  const YAML::Node cpu = config["Scheduling"]["SlurmQueues"][1];
  EXPECT_FALSE(cpu["CustomActions"]["OnNodeConfigured"]["Args"].IsDefined())
      << "no local scratch, no argument";
  bool readable = false;
  for (const auto& a : gpu["Iam"]["S3Access"])
    readable = readable || (a["BucketName"].as<std::string>() == "bkt" && a["KeyName"] &&
                            a["KeyName"].as<std::string>() == "p/compute-node.sh");
  EXPECT_TRUE(readable) << "the compute nodes read compute-node.sh with their role";
  expect_no_errors(files.cluster_config);

  // With the site's own script: compute-node.sh first, then the site's, as a Sequence the schema accepts.
  const ClusterFiles both = generate_cluster(parse_site_spec(
      official +
          "containers: {s3_prefix: s3://bkt/p}\ncustom_actions: {on_node_configured: s3://other/post.sh}\n",
      "s.yaml"));
  config = YAML::Load(both.cluster_config);
  const YAML::Node sequence =
      config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]["Sequence"];
  ASSERT_EQ(sequence.size(), 2u) << both.cluster_config;
  EXPECT_EQ(sequence[0]["Script"].as<std::string>(), "s3://bkt/p/compute-node.sh");
  EXPECT_EQ(sequence[0]["Args"][0].as<std::string>(), "/scratch");
  EXPECT_EQ(sequence[1]["Script"].as<std::string>(), "s3://other/post.sh");
  expect_no_errors(both.cluster_config);
  // A custom action with both, or neither, is still refused by the schema.
  std::string bad = both.cluster_config;
  const std::string seq_key = "        OnNodeConfigured:\n          Sequence:";
  ASSERT_NE(bad.find(seq_key), std::string::npos) << bad;
  bad.replace(bad.find(seq_key), seq_key.size(),
              "        OnNodeConfigured:\n          Script: s3://bkt/x.sh\n          Sequence:");
  bool refused = false;
  for (const auto& f : validate_cluster_config(bad, "c.yaml", {false, true, "3.16.3"}))
    refused = refused || f.message.find("needs exactly one of Script or Sequence") != std::string::npos;
  EXPECT_TRUE(refused) << "Script and Sequence together";

  std::string e = error(official + "parallelcluster_version: 3.11.0\ncontainers: {s3_prefix: s3://bkt/p}\n");
  EXPECT_NE(e.find("containers: ParallelCluster 3.11.0 has no Pyxis example configuration"),
            std::string::npos)
      << e;
  e = error(official + "containers: true\n");
  EXPECT_NE(e.find("containers.s3_prefix: missing"), std::string::npos) << e;
  e = error(base + "image: {os: ubuntu2204, custom_ami: ami-0123456789abcdef0}\n" +
            "spank: {s3_prefix: s3://bkt/p}\ncontainers: {s3_prefix: s3://bkt/q}\n");
  EXPECT_NE(e.find("containers.s3_prefix: 's3://bkt/q' is not spank.s3_prefix 's3://bkt/p'"),
            std::string::npos)
      << e;
  e = error(base + "image: {os: ubuntu2204, custom_ami: ami-0123456789abcdef0}\n" +
            "spank: {s3_prefix: s3://bkt/p, pyxis: true}\n");
  EXPECT_NE(e.find("spank.pyxis: Pyxis is turned on by the containers section now"), std::string::npos) << e;
}

// The plugin comes from the pcdino image: no custom AMI, no spank section; the image's release and OS
// must be the cluster's.
TEST(ClusterSite, SpankNeedsTheImageAndTheImageTheSitesRelease) {
  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24}\nqueues: [{name: q, instance_type: c5.xlarge}]\n";
  try {
    parse_site_spec(base + "spank:\n  s3_prefix: s3://bkt/p\n", "s.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("s.yaml:7:3: spank: needs image.custom_ami"), std::string::npos)
        << e.what();
  }
  const SiteSpec s = parse_site_spec(base +
                                         "image: {custom_ami: ami-0123456789abcdef0, ami_spec: "
                                         "../ami/x.yaml}\nspank: {s3_prefix: s3://bkt/p/}\n",
                                     "/specs/site/s.yaml");
  EXPECT_EQ(s.spank.s3_prefix, "s3://bkt/p");
  EXPECT_EQ(s.ami_spec, "/specs/ami/x.yaml") << "resolved against the site spec's folder";
  EXPECT_NO_THROW(check_image_spec(s, s.parallelcluster_version, "alinux2023", s.region, "x.yaml"));
  try {
    check_image_spec(s, "3.10.1", "alinux2023", s.region, "x.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "image.ami_spec: x.yaml builds for ParallelCluster 3.10.1 on alinux2023 in "
                  "us-east-1, the cluster is ParallelCluster 3.16.3 on alinux2023 in us-east-1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_image_spec(s, s.parallelcluster_version, "ubuntu2204", s.region, "x.yaml"), ConfigError);
  EXPECT_THROW(check_image_spec(s, s.parallelcluster_version, "alinux2023", "us-west-2", "x.yaml"),
               ConfigError)
      << "an AMI lives in one region";
}

// commands.sh checks the pinned release first and asks ParallelCluster (--dryrun) before creating.
TEST(ClusterGenerate, CommandsPinTheReleaseAndDryRunFirst) {
  const std::string sh = generate_cluster(example("p5-efa.yaml")).commands;
  EXPECT_NE(sh.find("PCLUSTER_VERSION=3.16.3\n"), std::string::npos) << sh;
  const auto version = sh.find("pcluster version"), deploy = sh.find("aws cloudformation deploy"),
             dry = sh.find("create --dryrun true\n"), real = sh.find("\ncreate\n");
  ASSERT_NE(version, std::string::npos);
  ASSERT_NE(dry, std::string::npos);
  ASSERT_NE(real, std::string::npos);
  EXPECT_LT(version, deploy);
  EXPECT_LT(dry, real);
}

// Site spec keys of this release: reservations (capacity blocks and on-demand), root volumes, Slurm
// settings, S3 access, the pinned release, Amazon Linux 2023 by default.
TEST(ClusterSite, ReservationsRootVolumesSlurmSettingsAndRelease) {
  const std::string base =
      "name: c\nregion: us-west-2\navailability_zone: us-west-2a\nhead_node:\n  ssh_allowed_cidr: "
      "10.0.0.0/8\nqueues:\n  - {name: q, instance_type: p4d.24xlarge";
  const auto error = [&](const std::string& queue, const std::string& extra = "") {
    try {
      parse_site_spec(base + queue + "}\n" + extra, "site.yaml");
      return std::string("no error");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  };
  const SiteSpec plain = parse_site_spec(base + "}\n", "site.yaml");
  EXPECT_EQ(plain.os, "alinux2023");
  EXPECT_EQ(plain.parallelcluster_version, parallelcluster::newest_release().release);
  // On-demand capacity reservations: by id or by resource group, not both, never on spot.
  EXPECT_EQ(error(", capacity_reservation_id: cr-0123456789abcdef0"), "no error");
  EXPECT_EQ(error(", capacity_reservation_resource_group_arn: "
                  "arn:aws:resource-groups:us-west-2:123456789012:group/odcr"),
            "no error");
  EXPECT_NE(error(", capacity_type: SPOT, capacity_reservation_id: cr-0123456789abcdef0")
                .find("queues[0].capacity_reservation_id: a SPOT queue cannot use a capacity reservation"),
            std::string::npos);
  EXPECT_NE(error(", capacity_reservation_id: cr-0123456789abcdef0, capacity_reservation_resource_group_arn: "
                  "arn:aws:resource-groups:us-west-2:123456789012:group/odcr")
                .find("not both"),
            std::string::npos);
  // Root volumes no smaller than ParallelCluster's AMIs (40 GiB), unless the AMI is the site's own.
  EXPECT_NE(
      error(", root_volume_gib: 30").find("queues[0].root_volume_gib: 30 GiB is smaller than the 40 GiB"),
      std::string::npos);
  EXPECT_EQ(error(", root_volume_gib: 30", "image: {custom_ami: ami-0123456789abcdef0}\n"), "no error");
  EXPECT_EQ(parse_site_spec(base + ", root_volume_gib: 64}\n", "site.yaml").queues[0].root_volume_gib, 64);
  // Slurm settings: mappings of slurm.conf parameters, kept in order.
  const SiteSpec slurm = parse_site_spec(
      base +
          ", slurm_settings: {DefMemPerCPU: 1900}}\nslurm:\n  settings:\n    - {NodeName: gpu1, CPUs: 8}\n",
      "site.yaml");
  ASSERT_EQ(slurm.slurm_settings.size(), 1u);
  EXPECT_EQ(slurm.slurm_settings[0], (SlurmLine{{"NodeName", "gpu1"}, {"CPUs", "8"}}));
  EXPECT_EQ(slurm.queues[0].slurm_settings, (SlurmLine{{"DefMemPerCPU", "1900"}}));
  EXPECT_NE(error("", "slurm:\n  settings: {MaxJobCount: 1}\n").find("slurm.settings: expected a list"),
            std::string::npos);
  EXPECT_NE(
      error(", slurm_settings: {Weight: [1]}").find("queues[0].slurm_settings.Weight: expected a value"),
      std::string::npos);
  // S3 access and the release.
  EXPECT_NE(error("", "iam:\n  s3_access:\n    - {bucket: Not_A_Bucket}\n").find("iam.s3_access[0].bucket"),
            std::string::npos);
  EXPECT_EQ(error("", "parallelcluster_version: 3.12.0\n"), "no error");
  EXPECT_EQ(error("", "parallelcluster_version: 3.11.0\n"), "no error");
  EXPECT_NE(error("", "parallelcluster_version: 3.10.1\n")
                .find("parallelcluster_version: pcdino checks configurations for ParallelCluster 3.11.0 to "
                      "3.16.3 (the 3.11.1 schema, with the changes known since), not 3.10.1"),
            std::string::npos);
  EXPECT_NE(error("", "parallelcluster_version: 3.17.0\n").find("not 3.17.0"), std::string::npos);
  // The OS against the release, and FSx for Lustre against the OS's official AMI.
  EXPECT_NE(error("", "image: {os: ubuntu2004}\n")
                .find("image.os: official ubuntu2004 AMIs exist from "
                      "ParallelCluster 3.0.0 until 3.14.0 (removed there)"),
            std::string::npos);
  EXPECT_EQ(error("", "parallelcluster_version: 3.13.2\nimage: {os: ubuntu2004}\n"), "no error");
  EXPECT_EQ(error("", "image: {os: ubuntu2404}\n"), "no error");
  const std::string fsx = "storage: {fsx: {capacity_gib: 1200}}\n";
  EXPECT_EQ(error("", fsx), "no error");
  EXPECT_NE(
      error("", "image: {os: ubuntu2404}\n" + fsx)
          .find("storage.fsx: ParallelCluster 3.16.3's official ubuntu2404 AMI has no Lustre client known to "
                "pcdino, so FSx for Lustre does not mount on its nodes"),
      std::string::npos)
      << error("", "image: {os: ubuntu2404}\n" + fsx);
  EXPECT_NE(error("", "image: {os: ubuntu2404}\n" + fsx).find("does not support Lustre"), std::string::npos)
      << "citing the cookbook's 3.13.0 note";
  EXPECT_EQ(error("", "image: {os: ubuntu2404, custom_ami: ami-0123456789abcdef0}\n" + fsx), "no error")
      << "a custom AMI may carry the Lustre client";
  EXPECT_NE(error("", "parallelcluster_version: 3.12.0\nimage: {os: ubuntu2404}\n")
                .find("from ParallelCluster "
                      "3.13.0"),
            std::string::npos);
}

// A key removed from ParallelCluster's schema after the restated release is an error for a file of a release
// that no longer has it, and accepted for an older one.
TEST(ClusterValidate, KeysRemovedSinceTheRestatedSchema) {
  const std::string text = R"(Region: us-west-2
Image: {Os: alinux2023}
HeadNode:
  InstanceType: c5.xlarge
  Networking: {SubnetId: subnet-0123456789abcdef0}
  Ssh: {KeyName: k}
LoginNodes:
  Pools:
    - Name: login
      Count: 1
      InstanceType: c5.xlarge
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      Ssh: {KeyName: k}
Scheduling:
  Scheduler: slurm
  SlurmQueues:
    - Name: q
      Networking: {SubnetIds: [subnet-0123456789abcdef0]}
      ComputeResources: [{Name: c, InstanceType: c5.xlarge, MinCount: 0, MaxCount: 2}]
)";
  const auto removed = [&](const std::string& release) {
    for (const auto& f : validate_cluster_config(text, "c.yaml", {false, false, release}))
      if (f.path == "LoginNodes.Pools[].Ssh.KeyName" && f.severity == Severity::error) return f.str();
    return std::string();
  };
  EXPECT_EQ(removed("3.14.0"), "");
  const auto warned = [&](const std::string& release) {
    for (const auto& f : validate_cluster_config(text, "c.yaml", {false, false, release}))
      if (f.path == "LoginNodes.Pools[].Ssh.KeyName" && f.severity == Severity::warning) return f.str();
    return std::string();
  };
  EXPECT_EQ(removed("3.15.0"), "") << "3.15.0 may or may not have it";
  EXPECT_NE(warned("3.15.0").find("removed from ParallelCluster's schema in 3.15.0 or by 3.15.1"),
            std::string::npos)
      << warned("3.15.0");
  EXPECT_NE(
      removed("3.16.3").find("c.yaml:13:22: LoginNodes.Pools[].Ssh.KeyName: removed from ParallelCluster's "
                             "schema by 3.15.1 (this file is for 3.16.3)"),
      std::string::npos)
      << removed("3.16.3");
  EXPECT_NE(removed("").find("removed"), std::string::npos) << "the newest release by default";
  EXPECT_NE(schema_basis("3.16.3").find("keys added after 3.12.0 are not known to pcdino"),
            std::string::npos);
  // Image.Os follows the release's operating systems, not the 3.11.1 schema's list.
  const auto os_error = [&](const std::string& os, const std::string& release) {
    std::string yaml = text;
    yaml.replace(yaml.find("Os: alinux2023"), 14, "Os: " + os);
    for (const auto& f : validate_cluster_config(yaml, "c.yaml", {false, false, release}))
      if (f.path == "Image.Os" && f.severity == Severity::error) return f.str();
    return std::string();
  };
  EXPECT_EQ(os_error("ubuntu2404", "3.16.3"), "");
  EXPECT_NE(
      os_error("ubuntu2404", "3.12.0").find("official ubuntu2404 AMIs exist from ParallelCluster 3.13.0"),
      std::string::npos);
  EXPECT_NE(os_error("ubuntu2004", "3.16.3").find("removed there"), std::string::npos);
  EXPECT_EQ(os_error("ubuntu2004", "3.13.2"), "");
  EXPECT_EQ(os_error("rocky9", "3.16.3"), "") << "a custom-AMI OS: the schema's verdict";
  EXPECT_NE(os_error("centos7", "3.16.3"), "") << "not in the schema";
  EXPECT_EQ(release_problem("3.16.3"), "");
  EXPECT_NE(release_problem("3.9.0"), "");
}

// ParallelCluster 3.11.1 slurm_settings_validator.py: parameters it writes itself are refused at each level
// (case-insensitively; at the cluster level only one-parameter lines, and the accounting ones only with a
// Database), and node names with -st- or -dy- are its own.
// slurm.settings against the release's Slurm (core/slurm_features.hpp's keys, issue #74): a line only a later
// Slurm reads is refused naming the line, the Slurm it needs and the release's.
TEST(ClusterSite, SlurmSettingsOfALaterSlurmAreRefusedForTheReleasesSlurm) {
  const std::string base =
      "name: c\nregion: us-east-1\navailability_zone: us-east-1a\nhead_node: {ssh_allowed_cidr: "
      "203.0.113.0/24}\nqueues: [{name: q, instance_type: c5.xlarge}]\n";
  const auto with = [&](const std::string& release, const std::string& line) {
    return site_error(base + "parallelcluster_version: " + release +
                      "\nslurm:\n  settings:\n    - {DefMemPerCPU: " + "1900}\n    - {" + line + "}\n");
  };
  std::string e = with("3.16.3", "HealthCheckTimeout: 120");
  EXPECT_NE(e.find("s.yaml:10:7: slurm.settings[1]: HealthCheckTimeout=120 needs Slurm 26.05 or later ("),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("); ParallelCluster 3.16.3 has Slurm 25.11.8"), std::string::npos) << e;
  e = with("3.16.3", "metricsauthusers: alice");  // slurm.conf's keys are case-insensitive
  EXPECT_NE(e.find("metricsauthusers=alice needs Slurm 26.05 or later"), std::string::npos) << e;
  e = with("3.16.3", "HealthCheckNodeState: 'IDLE,REBOOT_ONLY'");
  EXPECT_NE(e.find("HealthCheckNodeState=IDLE,REBOOT_ONLY needs Slurm 26.05 or later"), std::string::npos)
      << e;
  EXPECT_EQ(with("3.16.3", "HealthCheckNodeState: START_ONLY"), "(accepted)");
  e = with("3.14.0", "HealthCheckNodeState: START_ONLY");
  EXPECT_NE(
      e.find("needs Slurm 25.11 or later (Slurm 25.11.7 slurm.conf(5)); ParallelCluster 3.14.0 has Slurm "
             "24.11.6"),
      std::string::npos)
      << e;
  EXPECT_EQ(with("3.16.3", "SlurmctldParameters: 'enable_expedited_requeue,idle_on_node_suspend'"),
            "(accepted)");
  e = with("3.14.0", "SlurmctldParameters: 'idle_on_node_suspend,enable_expedited_requeue'");
  EXPECT_NE(e.find("needs Slurm 25.11 or later"), std::string::npos) << e;
  EXPECT_EQ(with("3.14.0", "SlurmctldParameters: idle_on_node_suspend"), "(accepted)");
}

TEST(ClusterValidate, CustomSlurmSettingsDenyListsAndNodeNames) {
  const std::string cluster_level = "  SlurmSettings:\n    CustomSlurmSettings:\n";
  const auto with = [&](const std::string& settings, const std::string& queue_extra = "") {
    std::string c = config(kPlainQueue + queue_extra);
    return findings(c.insert(c.find("  SlurmQueues:"), cluster_level + settings));
  };
  EXPECT_EQ(with("      - MaxJobCount: 50000\n").find("E "), std::string::npos)
      << with("      - MaxJobCount: 50000\n");
  EXPECT_NE(with("      - resumeProgram: /bin/true\n      - SuspendTime: 60\n")
                .find("E Scheduling.SlurmSettings.CustomSlurmSettings: ParallelCluster sets these slurm.conf "
                      "parameters itself at SlurmConf level: SuspendTime, resumeProgram"),
            std::string::npos);
  EXPECT_EQ(with("      - {NodeName: extra1, Gres: 'gpu:1'}\n").find("E "), std::string::npos)
      << "a node line (several parameters) is not checked against the deny-list";
  EXPECT_NE(with("      - {NodeName: q-st-cr-1, CPUs: 4}\n")
                .find("E Scheduling.SlurmSettings.CustomSlurmSettings[0]."
                      "NodeName: node name 'q-st-cr-1'"),
            std::string::npos);
  EXPECT_EQ(with("      - AccountingStorageType: accounting_storage/none\n").find("E "), std::string::npos);
  const std::string database =
      "    Database:\n      Uri: db.example.com:3306\n      UserName: slurm\n      PasswordSecretArn: "
      "arn:aws:secretsmanager:us-west-2:123456789012:secret:db\n";
  EXPECT_NE(with("      - AccountingStorageType: accounting_storage/none\n" + database)
                .find("SlurmConf level: AccountingStorageType"),
            std::string::npos)
      << "with a Database the accounting parameters are ParallelCluster's";
  EXPECT_NE(
      with("      - MaxJobCount: 1\n", "      CustomSlurmSettings: {OverSubscribe: 'YES', MaxTime: 60}\n")
          .find("E Scheduling.SlurmQueues[0].CustomSlurmSettings: ParallelCluster sets these slurm.conf "
                "parameters itself at Queue level: OverSubscribe"),
      std::string::npos);
  std::string cr_queue = kPlainQueue;
  cr_queue.insert(cr_queue.find("          MaxCount: 2\n"), "          CustomSlurmSettings: {Weight: 5}\n");
  EXPECT_NE(findings(config(cr_queue))
                .find("E Scheduling.SlurmQueues[0].ComputeResources[0].CustomSlurmSettings: "
                      "ParallelCluster sets these slurm.conf parameters itself at "
                      "ComputeResource level: Weight"),
            std::string::npos);
}

// Root volumes are bounded as every EBS volume (ebs_validators.py EbsVolumeTypeSizeValidator).
TEST(ClusterValidate, RootVolumesHaveTheirTypesBounds) {
  std::string queue = kPlainQueue;
  queue += "      ComputeSettings:\n        LocalStorage:\n          RootVolume: {Size: 20000}\n";
  EXPECT_NE(findings(config(queue))
                .find("E Scheduling.SlurmQueues[0].ComputeSettings.LocalStorage.RootVolume."
                      "Size: gp3 volumes are 1 to 16384 GiB, got 20000"),
            std::string::npos)
      << findings(config(queue));
  std::string head = config(kPlainQueue);
  head.insert(head.find("  Ssh:"), "  LocalStorage:\n    RootVolume: {VolumeType: io1, Size: 2}\n");
  EXPECT_NE(findings(head).find("E HeadNode.LocalStorage.RootVolume.Size: io1 volumes are 4 to 16384 GiB"),
            std::string::npos)
      << findings(head);
}

TEST(ClusterSite, CapacityBlockNeedsItsReservation) {
  const std::string spec =
      "name: c\nregion: us-west-2\navailability_zone: us-west-2a\nhead_node:\n  ssh_allowed_cidr: "
      "10.0.0.0/8\n"
      "queues:\n  - {name: q, instance_type: p5.48xlarge, capacity_type: CAPACITY_BLOCK, min_count: 2, "
      "max_count: 2}\n";
  try {
    parse_site_spec(spec, "site.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("queues[0].capacity_reservation_id"), std::string::npos) << e.what();
  }
  std::string with_id = spec;
  with_id.replace(with_id.find("max_count: 2}"), 13,
                  "max_count: 2, capacity_reservation_id: cr-0123456789abcdef0}");
  EXPECT_EQ(parse_site_spec(with_id, "site.yaml").queues[0].capacity_reservation_id, "cr-0123456789abcdef0");
}

// Integer keys that are not integers are findings with their key path, not an internal error.
TEST(ClusterValidate, IntegerKeysThatAreNotIntegersAreNamed) {
  std::string queue = kPlainQueue;
  queue.replace(queue.find("MaxCount: 2"), 11, "MaxCount: four");
  const std::string f = findings(config(queue));
  EXPECT_NE(
      f.find("E Scheduling.SlurmQueues[0].ComputeResources[0].MaxCount: expected an integer, got the string "
             "'four'"),
      std::string::npos)
      << f;
  const std::string fsx =
      findings(config(kPlainQueue,
                      "SharedStorage:\n  - Name: fsx\n    StorageType: FsxLustre\n    MountDir: "
                      "/fsx\n    FsxLustreSettings:\n      StorageCapacity: [1200]\n"));
  EXPECT_NE(
      fsx.find("E SharedStorage[0].FsxLustreSettings.StorageCapacity: expected a single value, got a list"),
      std::string::npos)
      << fsx;
}

// ParallelCluster's TagSchema (common_schema.py, v3.11.1): Key and Value strings (a bare 123 or true is
// not one), the reserved prefix parallelcluster: (but parallelcluster:custom_resource), no key twice.
TEST(ClusterValidate, TagsAsParallelClusterReadsThem) {
  const auto tags = [](const std::string& list) { return findings(config(kPlainQueue, "Tags:\n" + list)); };
  EXPECT_EQ(tags("  - {Key: project, Value: dino}\n  - {Key: parallelcluster:custom_resource, Value: x}\n  - "
                 "{Key: cost, Value: '123'}\n")
                .find("E "),
            std::string::npos);
  EXPECT_NE(tags("  - {Key: parallelcluster:version, Value: x}\n")
                .find("E Tags[0].Key: the prefix 'parallelcluster:' is reserved"),
            std::string::npos);
  EXPECT_NE(tags("  - {Key: a, Value: x}\n  - {Key: a, Value: y}\n")
                .find("E Tags[1].Key: tag key 'a' is used twice"),
            std::string::npos);
  EXPECT_NE(tags("  - {Key: cost, Value: 123}\n")
                .find("E Tags[0].Value: expected a string, got the integer '123' (quote it)"),
            std::string::npos);
  EXPECT_NE(
      tags("  - {Key: on, Value: true}\n").find("E Tags[0].Value: expected a string, got the boolean 'true'"),
      std::string::npos);
  EXPECT_NE(tags("  - {Key: on, Value: x}\n").find("E Tags[0].Key: expected a string, got the boolean 'on'"),
            std::string::npos)
      << "YAML 1.1, as ParallelCluster reads it: on is a boolean";
  EXPECT_NE(tags("  - {Key: k}\n").find("E Tags[0].Value: missing required key 'Value'"), std::string::npos);
  EXPECT_NE(tags("  - {Key: k, Value: " + std::string(257, 'v') + "}\n").find("Value: longer than 256"),
            std::string::npos);
  // Queue and compute resource lists are checked on their own.
  std::string queue = kPlainQueue;
  queue += "      Tags:\n        - {Key: parallelcluster:x, Value: y}\n";
  EXPECT_NE(findings(config(queue)).find("E Scheduling.SlurmQueues[0].Tags[0].Key: the prefix"),
            std::string::npos);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The generated examples as commands.sh renders them (network.yaml's outputs filled in).
std::string rendered(std::string text) {
  const std::pair<const char*, const char*> ids[] = {{"${PUBLIC_SUBNET_ID}", "subnet-0123456789abcdef0"},
                                                     {"${PRIVATE_SUBNET_ID}", "subnet-0123456789abcdef1"},
                                                     {"${EFA_SECURITY_GROUP_ID}", "sg-0123456789abcdef0"}};
  for (const auto& [from, to] : ids)
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from))
      text.replace(at, std::string(from).size(), to);
  return text;
}

std::string example_config(const std::string& name) {
  return read_text(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/" + name + "/cluster-config.yaml");
}

// Every generated example passes the schema walk and the validators with no error and no policy finding
// (what --strict asks), as a template and rendered; only cpu-only's missing key pair is a warning, as in
// ParallelCluster (KeyPairValidator).
TEST(ClusterExamples, PassTheSchemaTheValidatorsAndStrict) {
  for (const char* name : {"workshop", "p5-efa", "cpu-only"}) {
    const std::string text = example_config(name);
    const std::string expected =
        std::string(name) == "cpu-only"
            ? "W HeadNode.Ssh.KeyName: no key pair: nobody can log in to the head node unless the AMI allows "
              "another way\n"
            : "";
    EXPECT_EQ(findings(text, {false, true, ""}), expected) << name << " as a template";
    EXPECT_EQ(findings(rendered(text)), expected) << name << " rendered";
    EXPECT_NE(findings(text).find("E HeadNode.Networking.SubnetId: '${PUBLIC_SUBNET_ID}' is an unrendered"),
              std::string::npos)
        << name << ": a template read as a configuration";
  }
}

// ParallelCluster's minimal published example gives no error; its compute nodes share the head node's
// subnet and it names no SSH CIDR or IMDS setting, which are pcdino policy findings only.
TEST(ClusterExamples, ParallelClustersMinimalExampleHasNoError) {
  const std::string f =
      findings(read_text(std::string(PCDINO_SOURCE_DIR) + "/tests/cluster/pcluster-slurm.required.yaml"));
  EXPECT_EQ(
      f,
      "P HeadNode.Ssh.AllowedIps: not set: ParallelCluster then allows SSH from 0.0.0.0/0; name the CIDR "
      "that may connect\n"
      "P Imds.ImdsSupport: require IMDSv2 on every node (ImdsSupport: v2.0)\n"
      "P Scheduling.SlurmQueues[0].Networking.SubnetIds[0]: compute nodes in the head node's subnet "
      "subnet-12345678: the head node belongs in a public subnet, compute nodes in a private one\n");
}

// tests/cluster/pcluster_corpus.yaml: hand-edits of the examples with ParallelCluster 3.11.1's verdict
// beside each; pcdino must give the same verdict, its error at the case's key path.
// ParallelCluster's full published example is refused by ParallelCluster's own code (run offline with
// tests/cluster/pcluster_verdict.py on 2026-11-24) for 11 errors. pcdino finds the 10 that need no AWS call
// or that its catalogue knows (EFA on c5.2xlarge, cited as the online fact it is); the eleventh
// (EfaSecurityGroupValidator) reads security group rules from EC2.
TEST(ClusterExamples, ParallelClustersFullExampleGetsItsOwnErrors) {
  std::string errors, sources;
  for (const auto& f : validate_cluster_config(
           read_text(std::string(PCDINO_SOURCE_DIR) + "/tests/cluster/pcluster-slurm.full.yaml"), "full.yaml",
           {false, false, parallelcluster_release()})) {
    if (f.severity != Severity::error) continue;
    errors += f.path + "\n";
    sources += f.source + "\n";
  }
  EXPECT_EQ(
      errors,
      "Scheduling.SlurmSettings.ExternalSlurmdbd\n"                  // ExternalSlurmdbdVsDatabase...
      "Scheduling.SlurmSettings.MungeKeySecretArn\n"                 // ExternalSlurmdbdRequiresCustomMungeKey
      "Scheduling.SlurmQueues[1].ComputeResources[1].Efa.Enabled\n"  // EfaValidator
      "SharedStorage[2].FsxLustreSettings.PerUnitStorageThroughput\n"       // FsxStorageTypeOptionsValidator
      "SharedStorage[2].FsxLustreSettings.DailyAutomaticBackupStartTime\n"  // FsxBackupOptionsValidator
      "SharedStorage[2].FsxLustreSettings.CopyTagsToBackups\n"              // FsxBackupOptionsValidator
      "SharedStorage[4].FsxOntapSettings.VolumeId\n"                        // DuplicateNameValidator (IDs)
      "SharedStorage[0].EbsSettings.Iops\n"                                 // EbsVolumeIopsValidator
      "HeadNode.LocalStorage.RootVolume.Iops\n"                             // EbsVolumeIopsValidator
      "Scheduling.SlurmQueues[1].ComputeSettings.LocalStorage.RootVolume.Iops\n");  // EbsVolumeIopsValidator
  EXPECT_NE(sources.find(kInstanceSource), std::string::npos) << "the EFA fact cites the instance catalogue";
  EXPECT_NE(sources.find("validators/ebs_validators.py EbsVolumeIopsValidator"), std::string::npos);
}

// pcdino restates the Slurm scheduler's schema; an AWS Batch cluster is unchecked, said as a warning, not
// "unknown key" errors on ParallelCluster's own AwsBatchQueues.
TEST(ClusterValidate, AwsBatchIsLeftToParallelCluster) {
  const std::string f = findings(
      "Region: us-east-1\nImage:\n  Os: alinux2023\nHeadNode:\n  InstanceType: t3.micro\n  Networking:\n    "
      "SubnetId: subnet-12345678\nScheduling:\n  Scheduler: awsbatch\n  AwsBatchQueues:\n    - Name: q\n");
  EXPECT_EQ(f.find("E "), std::string::npos) << f;
  EXPECT_NE(f.find("W Scheduling.Scheduler: AWS Batch clusters are not checked by pcdino"), std::string::npos)
      << f;
}

TEST(ClusterCorpus, SameVerdictAsParallelCluster) {
  const YAML::Node corpus =
      YAML::LoadFile(std::string(PCDINO_SOURCE_DIR) + "/tests/cluster/pcluster_corpus.yaml");
  std::size_t cases = 0, rejects = 0;
  for (const auto& c : corpus["cases"]) {
    const std::string name = c["name"].as<std::string>();
    std::string text = example_config(c["base"].as<std::string>());
    if (!c["render"] || c["render"].as<bool>()) text = rendered(text);
    for (const auto& r : c["replace"]) {
      const std::string from = r[0].as<std::string>();
      const auto at = text.find(from);
      ASSERT_NE(at, std::string::npos) << name << ": '" << from << "' is not in the base";
      text.replace(at, from.size(), r[1].as<std::string>());
    }
    if (c["repeat"]) {
      const std::string after = c["repeat"][0].as<std::string>();
      std::string block;
      for (int n = 1; n <= c["repeat"][2].as<int>(); ++n) {
        std::string one = c["repeat"][1].as<std::string>();
        one.replace(one.find("{n}"), 3, std::to_string(n));
        block += one;
      }
      text.insert(text.find(after) + after.size(), block);
    }
    std::vector<std::string> errors;
    for (const auto& f : validate_cluster_config(text, name, {false, false, parallelcluster_release()}))
      if (f.severity == Severity::error) errors.push_back(f.path + ": " + f.message);
    std::string all;
    for (const auto& e : errors) all += "\n  " + e;
    if (c["verdict"].as<std::string>() == "accept") {
      EXPECT_TRUE(errors.empty()) << name << ": ParallelCluster accepts it, pcdino says" << all;
    } else {
      ++rejects;
      const std::string path = c["path"].as<std::string>();
      EXPECT_TRUE(std::any_of(errors.begin(), errors.end(),
                              [&](const std::string& e) { return e.rfind(path + ": ", 0) == 0; }))
          << name << ": ParallelCluster rejects it (" << c["pcluster"].as<std::string>()
          << "); pcdino has no error at " << path << ":" << all;
    }
    ++cases;
  }
  EXPECT_GE(cases, 30u);
  EXPECT_GE(rejects, 20u);
  // docs/clusters.md counts the cases: the count there is this file's.
  std::ifstream page(std::string(PCDINO_SOURCE_DIR) + "/docs/clusters.md");
  const std::string docs((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  std::smatch said;
  ASSERT_TRUE(std::regex_search(docs, said, std::regex("`tests/cluster/pcluster_corpus.yaml` holds (\\d+)")))
      << "docs/clusters.md no longer says how many cases the corpus holds";
  EXPECT_EQ(said[1].str(), std::to_string(cases)) << "docs/clusters.md's count of the corpus's hand-edits";
}

TEST(ClusterGenerate, WorkshopSpecGivesTheWorkshopsConfiguration) {
  const ClusterFiles files = generate_cluster(example("workshop.yaml"));
  const YAML::Node c = YAML::Load(files.cluster_config);
  EXPECT_EQ(c["Region"].as<std::string>(), "us-west-2");
  EXPECT_EQ(c["HeadNode"]["InstanceType"].as<std::string>(), "c5.4xlarge");
  const YAML::Node q = c["Scheduling"]["SlurmQueues"][0];
  EXPECT_EQ(q["Name"].as<std::string>(), "train-g4dn-2xl");
  EXPECT_EQ(q["ComputeResources"][0]["InstanceType"].as<std::string>(), "g4dn.2xlarge");
  EXPECT_EQ(q["ComputeResources"][0]["MinCount"].as<int>(), 2);
  EXPECT_EQ(q["ComputeResources"][0]["MaxCount"].as<int>(), 6);
  EXPECT_TRUE(q["Networking"]["PlacementGroup"]["Enabled"].as<bool>());
  EXPECT_EQ(q["ComputeSettings"]["LocalStorage"]["EphemeralVolume"]["MountDir"].as<std::string>(),
            "/local_scratch");
  const YAML::Node fsx = c["SharedStorage"][0]["FsxLustreSettings"];
  EXPECT_EQ(fsx["StorageCapacity"].as<int>(), 4800);
  EXPECT_EQ(fsx["DeploymentType"].as<std::string>(), "PERSISTENT_1");
  EXPECT_EQ(fsx["PerUnitStorageThroughput"].as<int>(), 200);
  EXPECT_EQ(fsx["DataCompressionType"].as<std::string>(), "LZ4");
  EXPECT_EQ(c["SharedStorage"][1]["EbsSettings"]["Size"].as<int>(), 200);
  EXPECT_EQ(c["Imds"]["ImdsSupport"].as<std::string>(), "v2.0");
  // Round trip through yaml-cpp is stable.
  YAML::Emitter once, twice;
  once << c;
  twice << YAML::Load(once.c_str());
  EXPECT_EQ(std::string(once.c_str()), std::string(twice.c_str()));
  EXPECT_EQ(findings(files.cluster_config, {false, true, ""}), "")
      << "a template, no error, policy or warning";
}

TEST(ClusterGenerate, WorkshopGpuMismatchIsReported) {
  const ClusterFiles files = generate_cluster(example("workshop.yaml"));
  PipelineConfig pipeline =
      parse_config("train_scDINO:\n  num_gpus: 4\n  nnodes: 2\n  num_workers: 1\n", "pipeline.yaml");
  const auto fit = check_pipeline_fit(files.cluster_config, "cluster-config.yaml", pipeline);
  ASSERT_EQ(fit.size(), 1u);
  EXPECT_EQ(fit[0].path, "Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType");
  EXPECT_NE(fit[0].message.find(
                "train_scDINO.num_gpus asks for 4 GPUs per node (--gres=gpu:4) but g4dn.2xlarge has 1"),
            std::string::npos);
  pipeline = parse_config("train_scDINO:\n  num_gpus: 1\n  nnodes: 7\n  num_workers: 4\n", "pipeline.yaml");
  const auto more = check_pipeline_fit(files.cluster_config, "cluster-config.yaml", pipeline);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_NE(more[0].message.find("train_scDINO.nnodes 7 is more than MaxCount 6"), std::string::npos);
  pipeline = parse_config("train_scDINO:\n  num_gpus: 1\n  nnodes: 2\n  num_workers: 4\n", "pipeline.yaml");
  EXPECT_TRUE(check_pipeline_fit(files.cluster_config, "cluster-config.yaml", pipeline).empty());
}

// Every Ref and Fn::GetAtt names a resource or parameter of the template (or an AWS:: pseudo parameter).
void collect_refs(const YAML::Node& n, std::set<std::string>& refs) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string key = kv.first.Scalar();
      if (key == "Ref") refs.insert(kv.second.Scalar());
      if (key == "Fn::GetAtt") refs.insert(kv.second[0].Scalar());
      if (key == "DependsOn") refs.insert(kv.second.Scalar());
      collect_refs(kv.second, refs);
    }
  } else if (n.IsSequence()) {
    for (const auto& item : n) collect_refs(item, refs);
  }
}

TEST(ClusterGenerate, NetworkStackReferencesOnlyDefinedIds) {
  for (const char* name : {"workshop.yaml", "p5-efa.yaml", "cpu-only.yaml"}) {
    const YAML::Node t = YAML::Load(generate_cluster(example(name)).network_stack);
    std::set<std::string> defined, refs;
    for (const auto& kv : t["Resources"]) defined.insert(kv.first.Scalar());
    for (const auto& kv : t["Parameters"]) defined.insert(kv.first.Scalar());
    collect_refs(t["Resources"], refs);
    collect_refs(t["Outputs"], refs);
    for (const auto& r : refs) {
      EXPECT_TRUE(defined.count(r) == 1 || r.rfind("AWS::", 0) == 0)
          << name << ": undefined logical id " << r;
    }
    EXPECT_GE(refs.size(), 10u);
    // EFA: all protocols to and from the group itself, both directions.
    const YAML::Node in = t["Resources"]["EfaIngressSelf"]["Properties"],
                     out = t["Resources"]["EfaEgressSelf"]["Properties"];
    EXPECT_EQ(in["IpProtocol"].as<std::string>(), "-1");
    EXPECT_EQ(in["SourceSecurityGroupId"]["Ref"].as<std::string>(), "EfaSecurityGroup");
    EXPECT_EQ(out["DestinationSecurityGroupId"]["Ref"].as<std::string>(), "EfaSecurityGroup");
    EXPECT_EQ(t["Resources"]["PublicRoute"]["Properties"]["GatewayId"]["Ref"].as<std::string>(),
              "InternetGateway");
    EXPECT_EQ(t["Resources"]["PrivateRoute"]["Properties"]["NatGatewayId"]["Ref"].as<std::string>(),
              "NatGateway");
    EXPECT_EQ(t["Resources"]["S3Endpoint"]["Properties"]["VpcEndpointType"].as<std::string>(), "Gateway");
  }
}

TEST(ClusterSite, ErrorsNameKeyLineAndColumn) {
  const auto error = [](const std::string& yaml) {
    try {
      parse_site_spec(yaml, "site.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string base =
      "name: c\nregion: us-west-2\navailability_zone: us-west-2a\nhead_node:\n  ssh_allowed_cidr: "
      "10.0.0.0/8\n"
      "queues:\n  - {name: q, instance_type: c5.xlarge}\n";
  EXPECT_EQ(error(base), "(no error)");
  EXPECT_NE(error(base + "colour: red\n").find("site.yaml:8:1: colour: unknown key"), std::string::npos);
  std::string az = base;
  az.replace(az.find("us-west-2a"), 10, "us-east-1a");
  EXPECT_NE(error(az).find("availability_zone: 'us-east-1a' is not in region us-west-2"), std::string::npos);
  std::string no_ssh = base;
  no_ssh.replace(no_ssh.find("  ssh_allowed_cidr: 10.0.0.0/8\n"), 30, "  key_name: k\n");
  EXPECT_NE(error(no_ssh).find("head_node.ssh_allowed_cidr: missing"), std::string::npos);
}

// The key table names each key once, lists every key the examples use, and says its type and default.
TEST(ClusterSite, KeyTableListsEveryKeyOnce) {
  std::map<std::string, SiteKey> keys;
  for (const auto& k : site_keys()) EXPECT_TRUE(keys.emplace(k.path, k).second) << k.path << " twice";
  // Every key path of the examples, list elements written "[]" (the values of tags and of Slurm settings are
  // the user's own keys).
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& node,
                                                                        const std::string& path) {
    if (!path.empty()) {
      EXPECT_EQ(keys.count(path), 1u) << path << " is not in site_keys()";
    }
    if (path == "tags" || path == "slurm.settings" || path.find("slurm_settings") != std::string::npos)
      return;
    if (node.IsMap())
      for (const auto& kv : node) walk(kv.second, (path.empty() ? "" : path + ".") + kv.first.Scalar());
    else if (node.IsSequence() && node.size() > 0 && node[0].IsMap())
      for (const auto& item : node)
        for (const auto& kv : item) walk(kv.second, path + "[]." + kv.first.Scalar());
  };
  for (const char* name : {"workshop.yaml", "p5-efa.yaml", "cpu-only.yaml"})
    walk(YAML::LoadFile(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/" + name), "");
  EXPECT_EQ(keys.at("image.os").default_value, "alinux2023");
  EXPECT_EQ(keys.at("queues[].max_count").type, "integer");
  EXPECT_EQ(keys.at("queues[].max_count").accepts, "[0, 10000]");
  EXPECT_EQ(keys.at("storage.fsx.throughput_per_tib").default_value, "125");
  EXPECT_EQ(keys.at("parallelcluster_version").accepts,
            std::string("a release like ") + parallelcluster::newest_release().release);
  // A default computed from the release table is listed as the parser applies it.
  EXPECT_EQ(keys.at("parallelcluster_version").default_value, parallelcluster::newest_release().release);
  EXPECT_TRUE(keys.at("head_node.ssh_allowed_cidr").required);
  EXPECT_FALSE(keys.at("queues[].capacity_reservation_id").required) << "only with CAPACITY_BLOCK";
  EXPECT_EQ(keys.count("monitoring.prometheus.retention"), 1u);
  EXPECT_EQ(keys.count("iam.s3_access[].bucket"), 1u);
}

// Issue #70: the p5 example with one more iam.s3_access item (a YAML flow mapping), as parse_site_spec()
// reads it: its error, or "(accepted)".
std::string with_grant(const std::string& grant, const std::string& on_node_configured = "") {
  std::ifstream in(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/p5-efa.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string actions = "custom_actions:\n";
  yaml.replace(yaml.find(actions), actions.size(), "    - " + grant + "\n" + actions);
  if (!on_node_configured.empty()) {
    const std::string script = "s3://research-bucket/pcluster/post-install.sh";
    yaml.replace(yaml.find(script), script.size(), on_node_configured);
  }
  return site_error(yaml);
}

// A write grant that reaches head-node.sh, compute-node.sh or the site's own custom action hands root on the
// nodes to every job (the compute nodes give jobs the instance role): refused at its key, naming the grant's
// key pattern and the script's key. The p5 example uploads both scripts to
// s3://research-bucket/pcluster/pcdino.
TEST(ClusterSite, AWriteGrantOnAScriptRunAsRootIsRefused) {
  const std::string refused = with_grant("{bucket: research-bucket, key: pcluster/*, write: true}");
  EXPECT_NE(refused.find("s.yaml:59:7: iam.s3_access[2]: write access to key 'pcluster/*' in bucket "
                         "research-bucket covers key 'pcluster/pcdino/head-node.sh' "
                         "(s3://research-bucket/pcluster/pcdino/head-node.sh), head-node.sh"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("which ParallelCluster runs as root"), std::string::npos) << refused;
  // The whole bucket; the site's own custom action (its key only); compute-node.sh.
  EXPECT_NE(with_grant("{bucket: research-bucket, write: true}")
                .find("the whole bucket research-bucket covers key"),
            std::string::npos);
  EXPECT_NE(
      with_grant("{bucket: research-bucket, key: pcluster/post-install.sh, write: true}")
          .find("covers key 'pcluster/post-install.sh' (s3://research-bucket/pcluster/post-install.sh), "
                "custom_actions.on_node_configured"),
      std::string::npos);
  EXPECT_NE(with_grant("{bucket: research-bucket, key: pcluster/pcdino/compute-*, write: true}")
                .find("covers key 'pcluster/pcdino/compute-node.sh'"),
            std::string::npos);
  // Read access, another prefix, another bucket: accepted.
  EXPECT_EQ(with_grant("{bucket: research-bucket, key: pcluster/*}"), "(accepted)");
  EXPECT_EQ(with_grant("{bucket: research-bucket, key: results/*, write: true}"), "(accepted)");
  EXPECT_EQ(with_grant("{bucket: research-bucket, key: pcluster/pcdino, write: true}"), "(accepted)")
      << "a key without '*' is that one object";
  EXPECT_EQ(with_grant("{bucket: research-results-2, write: true}"), "(accepted)");
  // IAM's '*' spans '/', and '?' is one character.
  EXPECT_NE(with_grant("{bucket: research-bucket, key: '*.sh', write: true}").find("iam.s3_access[2]"),
            std::string::npos);
  const std::string one =
      with_grant("{bucket: research-bucket, key: 'p?luster/pcdino/head-node.sh', write: true}");
  EXPECT_NE(one.find("covers key 'pcluster/pcdino/head-node.sh'"), std::string::npos) << one;
  // The site's custom action as an https:// URL of S3 is judged as its bucket and key.
  EXPECT_NE(with_grant("{bucket: scripts-bucket, key: boot/*, write: true}",
                       "https://scripts-bucket.s3.us-east-1.amazonaws.com/boot/post-install.sh")
                .find("covers key 'boot/post-install.sh'"),
            std::string::npos);
  EXPECT_EQ(with_grant("{bucket: scripts-bucket, key: boot/*, write: true}", "https://example.com/boot/x.sh"),
            "(accepted)")
      << "a URL of another host names no bucket";

  // A spec built in code is checked by generate_cluster() too.
  SiteSpec s = example("p5-efa.yaml");
  s.s3_access.push_back({"research-bucket", "pcluster/pcdino/*", true});
  try {
    generate_cluster(s);
    ADD_FAILURE() << "generated";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("iam.s3_access[2]: write access to key 'pcluster/pcdino/*'"),
              std::string::npos)
        << e.what();
  }
}

TEST(ClusterSite, IamPatternsAndS3Urls) {
  EXPECT_TRUE(iam_pattern_matches("pcluster/*", "pcluster/pcdino/head-node.sh"));
  EXPECT_TRUE(iam_pattern_matches("*", ""));
  EXPECT_TRUE(iam_pattern_matches("*/head-node.sh", "a/b/head-node.sh"));
  EXPECT_TRUE(iam_pattern_matches("a*b*c", "aXbYbZc"));
  EXPECT_TRUE(iam_pattern_matches("a?c", "abc"));
  EXPECT_FALSE(iam_pattern_matches("a?c", "ac"));
  EXPECT_FALSE(iam_pattern_matches("pcluster", "pcluster/x"));
  EXPECT_FALSE(iam_pattern_matches("PCluster/*", "pcluster/x")) << "case-sensitive";
  const auto at = [](const std::string& url) {
    const auto o = s3_object(url);
    return o ? o->bucket + " " + o->key : std::string("(none)");
  };
  EXPECT_EQ(at("s3://b/k/x.sh"), "b k/x.sh");
  EXPECT_EQ(at("s3://b"), "(none)");
  EXPECT_EQ(at("https://my.bucket.s3.amazonaws.com/k/x.sh"), "my.bucket k/x.sh");
  EXPECT_EQ(at("https://bkt.s3.eu-west-1.amazonaws.com/k%20x.sh?versionId=1"), "bkt k x.sh");
  EXPECT_EQ(at("https://bkt.s3-us-west-2.amazonaws.com/x.sh"), "bkt x.sh");
  EXPECT_EQ(at("https://bkt.s3.dualstack.us-east-1.amazonaws.com/x.sh"), "bkt x.sh");
  EXPECT_EQ(at("https://s3.us-east-1.amazonaws.com/bkt/k/x.sh"), "bkt k/x.sh");
  EXPECT_EQ(at("https://s3.amazonaws.com/bkt/x.sh"), "bkt x.sh");
  EXPECT_EQ(at("https://bkt.s3.cn-north-1.amazonaws.com.cn/x.sh"), "bkt x.sh");
  EXPECT_EQ(at("https://ap-111122223333.s3-accesspoint.us-east-1.amazonaws.com/x.sh"), "(none)");
  EXPECT_EQ(at("https://d111111abcdef8.cloudfront.net/x.sh"), "(none)");
}

// commands.sh quotes what it takes from the spec: an upload prefix may hold any character but blanks.
TEST(ClusterGenerate, CommandsQuoteTheUploadUrls) {
  SiteSpec s = example("p5-efa.yaml");
  s.spank.s3_prefix = s.containers.s3_prefix = s.node_check.s3_prefix = "s3://research-bucket/a$(id)'b;c";
  const std::string sh = generate_cluster(s).commands;
  EXPECT_NE(sh.find("head-node.sh 's3://research-bucket/a$(id)'\\''b;c/head-node.sh'\n"), std::string::npos)
      << sh;
  EXPECT_NE(sh.find("compute-node.sh 's3://research-bucket/a$(id)'\\''b;c/compute-node.sh'\n"),
            std::string::npos)
      << sh;
  EXPECT_EQ(sh.find("a$(id)'b"), std::string::npos) << "no unquoted substitution";
}

}  // namespace
}  // namespace pcdino::cluster
