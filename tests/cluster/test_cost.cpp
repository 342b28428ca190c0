// `pcdino cluster cost` (issue #71 item 4): each example site spec against a hand computation from the
// price tables (cluster/src/prices.cpp), the run estimate adding only what the always-on total lacks, and
// every missing price named with its region.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pcdino/cluster/cost.hpp"
#include "pcdino/cluster/prices.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/core/config.hpp"

namespace pcdino::cluster {
namespace {

SiteSpec example(const std::string& name) {
  return load_site_spec(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/" + name);
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const CostLine* line(const ClusterCost& c, const std::string& what) {
  for (const auto& l : c.lines)
    if (l.what == what) return &l;
  return nullptr;
}

// The command: the workshop site (us-west-2), sbatch/examples/workshop.yaml (100 epochs, 2 nodes x
// 1 GPU on partition train-g4dn-2xl), 1,000,000 images at 900 images/s per GPU.
//   us-west-2 rows: c5.4xlarge 0.68 USD/h (greenops), g4dn.2xlarge 0.752 USD/h (vantage), FSx PERSISTENT_1
//                   at 200 MB/s/TiB 0.290 USD/GB-month (fsx-us-west-2), EBS gp3 0.08 USD/GB-month and NAT
//                   gateway 0.045 USD/h (eks-arcade), public IPv4 0.005 USD/h (every region).
//   head node:      c5.4xlarge                                 = 0.680 USD/h
//   static nodes:   2 x 0.752                                  = 1.504 USD/h
//   FSx:            4800 x 0.290 / 730 = 1392 / 730            = 1.906849 USD/h
//   EBS /apps:      200 x 0.08 / 730 = 16 / 730                = 0.021918 USD/h
//   NAT gateway:                                                 0.045 USD/h
//   public IPv4:    2 x 0.005 (NAT gateway's EIP, head node)   = 0.010 USD/h
//   always-on:      0.68 + 1.504 + 1.906849 + 0.021918 + 0.045 + 0.010 = 4.167767 USD/h
//   unpriced:       the head node's and the queue's root volumes are the AMI's size (not in the site spec).
//   hours:          100 x 1,000,000 / (900 x 2) / 3600         = 15.432 h
//   run:            the 2 nodes are the queue's 2 static ones: 15.432099 x 4.167767 = 64.317 USD
//   (before #71: 56.91 USD, the static nodes counted twice and us-east-1's prices; before the us-west-2
//   rows: 23.36 USD, the head node, FSx, /apps and the NAT gateway unpriced)
TEST(ClusterCost, WorkshopAgainstTheHandComputation) {
  const SiteSpec site = example("workshop.yaml");
  const ClusterCost c = cluster_cost(site);
  ASSERT_NE(line(c, "queue train-g4dn-2xl static nodes"), nullptr);
  EXPECT_NEAR(*line(c, "head node")->usd_per_hour, 0.68, 1e-9);
  EXPECT_NEAR(*line(c, "queue train-g4dn-2xl static nodes")->usd_per_hour, 1.504, 1e-9);
  EXPECT_NEAR(*line(c, "FSx for Lustre")->usd_per_hour, 4800 * 0.290 / 730, 1e-12);
  EXPECT_NEAR(*line(c, "EBS /apps")->usd_per_hour, 200 * 0.08 / 730, 1e-12);
  EXPECT_NEAR(*line(c, "public IPv4 addresses")->usd_per_hour, 0.010, 1e-9);
  EXPECT_NEAR(c.usd_per_hour, 0.68 + 1.504 + 4800 * 0.290 / 730 + 200 * 0.08 / 730 + 0.045 + 0.010, 1e-9);
  EXPECT_NEAR(c.usd_per_hour, 4.167767, 1e-6);
  EXPECT_TRUE(has(c.missing, "size unknown: head_node.root_volume_gib unset (the AMI's size)"));
  EXPECT_TRUE(has(c.missing, "size unknown: queues[0].root_volume_gib unset (the AMI's size)"));
  EXPECT_EQ(c.missing.size(), 2u);

  const PipelineConfig p = load_config(std::string(PCDINO_SOURCE_DIR) + "/sbatch/examples/workshop.yaml");
  const RunCost r = run_cost(site, c, p, {1000000, 900});
  EXPECT_EQ(r.problem, "");
  EXPECT_EQ(r.queue, "train-g4dn-2xl");
  EXPECT_EQ(r.gpus, 2);
  EXPECT_NEAR(r.hours, 1e8 / 1800.0 / 3600.0, 1e-9);
  EXPECT_EQ(r.extra_nodes, 0) << "the 2 static nodes are already in the always-on total";
  EXPECT_NEAR(r.usd, r.hours * c.usd_per_hour, 1e-9);
  EXPECT_NEAR(r.usd, 64.317, 1e-3);

  const std::string report = cost_report(site, &p, {1000000, 900});
  EXPECT_NE(report.find("queue train-g4dn-2xl static nodes"), std::string::npos) << report;
  EXPECT_NE(report.find("1.504 USD/h"), std::string::npos) << report;
  EXPECT_NE(report.find("0.680 USD/h"), std::string::npos) << report;
  EXPECT_EQ(report.find("no price in the table"), std::string::npos) << report;
  EXPECT_NE(report.find("4.168 USD/h"), std::string::npos) << report;
  EXPECT_NE(report.find("= 15.43 h"), std::string::npos) << report;
  EXPECT_NE(report.find("its nodes are the queue's static ones, already in the always-on total"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("15.43 h x (4.168 USD/h always-on + 0.000 USD/h extra) = 64.32 USD (without the 2 "
                        "unpriced line(s) above)"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("56.91"), std::string::npos) << report;
  EXPECT_NE(report.find(price_source_text("vantage-gpu-2026-01")), std::string::npos) << "sources cited";
  EXPECT_NE(report.find(price_source_text("greenops-ec2-2026-09")), std::string::npos) << "sources cited";
  EXPECT_NE(report.find(price_source_text("fsx-us-west-2-2026-07")), std::string::npos) << "sources cited";
  EXPECT_NE(report.find(price_source_text("eks-arcade-us-west-2-2026-10")), std::string::npos)
      << "sources cited";
}

// p5-efa (us-east-1): a p5 capacity block (4 static nodes), a p4d queue on an on-demand capacity reservation.
//   head node c5.4xlarge                            0.680 USD/h
//   head root 100 GiB gp3: 100 x 0.08 / 730       = 0.010959 USD/h
//   p5 root volumes 4 x 200 GiB: 800 x 0.08 / 730 = 0.087671 USD/h (EBS bills apart from the block)
//   /apps 100 GiB gp3: 100 x 0.08 / 730           = 0.010959 USD/h
//   NAT gateway                                     0.045 USD/h
//   public IPv4 2 x 0.005                         = 0.010 USD/h
//   always-on = 0.68 + 0.010959 + 0.087671 + 0.010959 + 0.045 + 0.010 = 0.844589 USD/h
//   the p5 instances: prepaid block, not hourly (last table rate 39.33 USD/instance-hour until 2024-12-31:
//   4 x 39.33 x 24 = 3775.68 USD per day); FSx PERSISTENT_2 at 250 MB/s/TiB has no row.
//   run on p4d, 2 nodes x 8 GPUs, 10 epochs x 5,760,000 images at 100 images/s per GPU:
//   hours = 10 x 5,760,000 / (100 x 16) / 3600 = 10 h; 2 nodes beyond p4d's 0 static ones, each
//   21.957642 + 200 x 0.08 / 730 = 21.979560 USD/h, so 43.959120 USD/h;
//   run = 10 x (0.844589 + 43.959120) = 448.037 USD
TEST(ClusterCost, P5EfaAgainstTheHandComputation) {
  const SiteSpec site = example("p5-efa.yaml");
  const ClusterCost c = cluster_cost(site);
  EXPECT_NEAR(*line(c, "head node")->usd_per_hour, 0.68, 1e-9);
  EXPECT_NEAR(*line(c, "head node root volume")->usd_per_hour, 100 * 0.08 / 730, 1e-12);
  EXPECT_NEAR(*line(c, "queue p5 root volumes")->usd_per_hour, 800 * 0.08 / 730, 1e-12);
  EXPECT_EQ(line(c, "queue p5 static nodes"), nullptr) << "a capacity block is not priced as on-demand";
  EXPECT_NEAR(c.usd_per_hour, 0.68 + 100 * 0.08 / 730 + 800 * 0.08 / 730 + 100 * 0.08 / 730 + 0.045 + 0.010,
              1e-9);
  EXPECT_NEAR(c.usd_per_hour, 0.844589, 1e-6);
  EXPECT_EQ(c.missing, std::vector<std::string>{
                           "no price in the table for FSx PERSISTENT_2 at 250 MB/s/TiB in us-east-1"});
  ASSERT_GE(c.excluded.size(), 2u);
  EXPECT_NE(c.excluded[0].find("queue p5: capacity block cr-0123456789abcdef0 of 4 x p5.48xlarge, paid up "
                               "front for its days when bought (AWS's rate was 39.330 USD per instance-hour "
                               "until 2024-12-31, 3775.68 USD per day for 4 instances"),
            std::string::npos)
      << c.excluded[0];
  EXPECT_NE(c.excluded[1].find("queue p4d: on-demand capacity reservation cr-0fedcba9876543210"),
            std::string::npos)
      << c.excluded[1];

  const PipelineConfig p = parse_config(
      "train_scDINO:\n  epochs: 10\n  nnodes: 2\n  num_gpus: 8\nslurm:\n  partition: p4d\n", "p.yaml");
  const RunCost r = run_cost(site, c, p, {5760000, 100});
  EXPECT_EQ(r.problem, "");
  EXPECT_NEAR(r.hours, 10.0, 1e-12);
  EXPECT_EQ(r.extra_nodes, 2);
  EXPECT_EQ(r.extra_missing, "");
  EXPECT_NEAR(r.extra_usd_per_hour, 2 * (21.957642 + 200 * 0.08 / 730), 1e-9);
  EXPECT_NEAR(r.usd, 448.037, 1e-3);
  const std::string report = cost_report(site, &p, {5760000, 100});
  EXPECT_NE(report.find("2 node(s) beyond the queue's static ones, with root volumes: 43.959 USD/h"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("= 448.04 USD (without the 1 unpriced line(s) above)"), std::string::npos) << report;

  // On the capacity block itself: its 4 nodes are the block's, nothing is added by the hour.
  const PipelineConfig on_block = parse_config(
      "train_scDINO:\n  epochs: 10\n  nnodes: 4\n  num_gpus: 8\nslurm:\n  partition: p5\n", "p.yaml");
  EXPECT_EQ(run_cost(site, c, on_block, {5760000, 100}).extra_nodes, 0);
  EXPECT_TRUE(run_cost(site, c, on_block, {5760000, 100}).capacity_block);
  EXPECT_NE(cost_report(site, &on_block, {5760000, 100})
                .find("its nodes are the queue's capacity block, prepaid (not in the total)"),
            std::string::npos);
  // More nodes than the queue has: no estimate, and why.
  const PipelineConfig too_many = parse_config(
      "train_scDINO:\n  epochs: 10\n  nnodes: 5\n  num_gpus: 8\nslurm:\n  partition: p5\n", "p.yaml");
  EXPECT_EQ(run_cost(site, c, too_many, {5760000, 100}).problem,
            "the run needs 5 nodes; queue p5 has at most 4 (max_count)");
}

// cpu-only (eu-west-1): c5.2xlarge 0.384 USD/h (greenops), NAT gateway 0.048 USD/h (the eu-west-1 offer
// file), public IPv4 2 x 0.005 = 0.010 USD/h; the c6i queue has no static node; no eu-west-1 FSx row.
//   always-on = 0.384 + 0.048 + 0.010 = 0.442 USD/h
TEST(ClusterCost, CpuOnlyAgainstTheHandComputation) {
  const ClusterCost c = cluster_cost(example("cpu-only.yaml"));
  EXPECT_NEAR(*line(c, "head node")->usd_per_hour, 0.384, 1e-12);
  EXPECT_NEAR(c.usd_per_hour, 0.384 + 0.048 + 0.010, 1e-12);
  EXPECT_NEAR(c.usd_per_hour, 0.442, 1e-12);
  EXPECT_EQ(c.missing,
            (std::vector<std::string>{"size unknown: head_node.root_volume_gib unset (the AMI's size)",
                                      "no price in the table for FSx SCRATCH_2 in eu-west-1"}));
  const std::string report = cost_report(example("cpu-only.yaml"), nullptr, {});
  EXPECT_NE(report.find("the total lacks the 2 unpriced line(s) above"), std::string::npos) << report;
  EXPECT_EQ(report.find("Training run"), std::string::npos) << "no pipeline, no run estimate";
}

// A region or an instance type the tables lack is named with both; never another region's price.
TEST(ClusterCost, AMissingPriceIsNamedNeverZeroNorAnotherRegions) {
  SiteSpec s = example("workshop.yaml");
  s.region = "ap-south-2";
  s.queues[0].instance_type = "g4dn.2xlarge";
  ClusterCost c = cluster_cost(s);
  EXPECT_TRUE(has(c.missing, "no price in the table for g4dn.2xlarge in ap-south-2"))
      << "us-east-1 has the type, ap-south-2 not";
  EXPECT_FALSE(line(c, "queue train-g4dn-2xl static nodes")->usd_per_hour.has_value());
  EXPECT_NEAR(c.usd_per_hour, 0.010, 1e-12) << "only the every-region IPv4 row applies";
  EXPECT_NE(cost_report(s, nullptr, {}).find("no price in the table for g4dn.2xlarge in ap-south-2"),
            std::string::npos);

  s = example("p5-efa.yaml");
  s.queues[0].capacity_type = "ONDEMAND";
  s.queues[0].capacity_reservation_id.clear();
  s.queues[0].instance_type = "x9.large";
  c = cluster_cost(s);
  EXPECT_TRUE(has(c.missing, "no price in the table for x9.large in us-east-1"));

  s.queues[0].instance_type = "g4dn.2xlarge";
  s.queues[0].capacity_type = "SPOT";
  c = cluster_cost(s);
  EXPECT_TRUE(has(c.missing, "no spot price in the table for g4dn.2xlarge")) << "not the on-demand price";
}

TEST(ClusterCost, ThePartitionMustBeAQueue) {
  const SiteSpec site = example("workshop.yaml");
  const PipelineConfig p =
      parse_config("train_scDINO:\n  epochs: 1\n  nnodes: 1\nslurm:\n  partition: gpu\n", "p.yaml");
  EXPECT_EQ(run_cost(site, cluster_cost(site), p, {1000, 10}).problem,
            "slurm.partition 'gpu' is no queue of dino-workshop (queues: train-g4dn-2xl)");
  EXPECT_NE(cost_report(site, &p, {1000, 10}).find("Training run: no estimate: slurm.partition 'gpu'"),
            std::string::npos);
  // Without a partition the first queue: 1 node, 2 static ones, nothing added.
  const PipelineConfig first = parse_config("train_scDINO:\n  epochs: 1\n  nnodes: 1\n", "p.yaml");
  const RunCost r = run_cost(site, cluster_cost(site), first, {36000, 10});
  EXPECT_EQ(r.queue, "train-g4dn-2xl");
  EXPECT_NEAR(r.hours, 1.0, 1e-12);
  EXPECT_EQ(r.extra_nodes, 0);
}

// Every row cites a source the report can print.
TEST(ClusterPrices, EveryRowNamesAKnownSource) {
  for (const auto& region : {"us-east-1", "us-west-2", "eu-west-1"}) {
    for (const auto& type : {"g4dn.2xlarge", "p4d.24xlarge", "c5.4xlarge", "p5.48xlarge"}) {
      if (const InstancePrice* p = instance_price(region, type); p != nullptr) {
        EXPECT_NE(price_source_text(p->source), "") << region << " " << type;
      }
    }
  }
  EXPECT_NE(price_source_text(service_price("eu-west-1", kPricePublicIpv4Hour)->source), "");
  EXPECT_NEAR(service_price("eu-west-1", kPriceNatGatewayHour)->usd, 0.048, 1e-12);
  EXPECT_EQ(service_price("eu-west-1", kPriceEbsGp3GbMonth), nullptr) << "no eu-west-1 gp3 row yet";
  EXPECT_EQ(service_price("ap-south-2", kPriceNatGatewayHour), nullptr);
  EXPECT_NE(price_source_text(capacity_block_price("us-east-1", "p5.48xlarge")->source), "");
  EXPECT_EQ(fsx_price("us-east-1", "PERSISTENT_2", 250), nullptr);
  EXPECT_NEAR(fsx_price("us-east-1", "SCRATCH_2", 0)->usd_per_gb_month, 0.140, 1e-12);
}

}  // namespace
}  // namespace pcdino::cluster
