// The price tables of `pcdino cluster cost` (prices.hpp). A row is a fact read from the source it names;
// a region or item without a row stays without one until a source for it is found.
#include "pcdino/cluster/prices.hpp"

namespace pcdino::cluster {

namespace {

constexpr const char* kVantageGpu = "vantage-gpu-2026-01";
constexpr const char* kEc2UsEast1 = "ec2-us-east-1-2025";
constexpr const char* kFsxUsEast1 = "fsx-us-east-1-2026";
constexpr const char* kNatUsEast1 = "nat-us-east-1-2026";
constexpr const char* kIpv4 = "ipv4-2024";
constexpr const char* kEbsUsEast1 = "ebs-us-east-1-2025";
constexpr const char* kCapacityBlocks = "capacity-blocks-2024";
constexpr const char* kEc2UsWest2EuWest1 = "greenops-ec2-2026-09";
constexpr const char* kUsWest2EbsNat = "eks-arcade-us-west-2-2026-10";
constexpr const char* kNatEuWest1 = "nat-eu-west-1-2026-09";
constexpr const char* kFsxUsWest2 = "fsx-us-west-2-2026-07";

}  // namespace

const std::vector<PriceSource>& price_sources() {
  static const std::vector<PriceSource> sources = {
      {kVantageGpu,
       "GPU and accelerator instances: instances.vantage.sh data as tsaol/aws-gpu data/<family>_instances.js "
       "carries it ('Last updated: 2026-01-21'), pricing.<region>.onDemand; read 2026-11-29"},
      {kEc2UsEast1,
       "CPU instances in us-east-1: instances.vantage.sh data and a January 2025 copy of "
       "aws.amazon.com/ec2/pricing/on-demand, read 2026-11-22 (c5.2xlarge 0.34 and c5.4xlarge 0.68 also in "
       "the "
       "EC2 Auto Scaling User Guide's 'Spot price per unit hour example')"},
      {kFsxUsEast1,
       "FSx for Lustre in us-east-1: learning-aws pricing notes and c3x.dev/resources/aws/"
       "aws_fsx_lustre_file_system (2026: SSD at 125 MB/s/TiB ~0.145 USD/GB-month), read 2026-11-22"},
      {kNatUsEast1,
       "NAT gateway in us-east-1, 0.045 USD per gateway-hour plus 0.045 USD per GB processed: "
       "basavytix.com/blog/aws-nat-gateway-pricing and rajesh.medampudi.com/blog/aws-nat-gateway-hidden-tax "
       "(2026), read 2026-11-29"},
      {kIpv4,
       "public IPv4 addresses, 0.005 USD per address-hour in every AWS region since 2024-02-01 (NAT "
       "gateways' "
       "and instances' included): AWS's announcement as haufe-akademie.de/en/skill-it/blog/"
       "aws-gebuehren-ipv4-adressen and doit.com/aws-public-ipv4-price-increase-the-complete-guide report "
       "it, "
       "read 2026-11-29"},
      {kEbsUsEast1,
       "EBS gp3 in us-east-1, 0.08 USD per GB-month (3000 IOPS and 125 MB/s included): taourl.com/"
       "read-2670558.html (2025-05-12) quoting aws.amazon.com/ebs/pricing, read 2026-11-29"},
      {kCapacityBlocks,
       "EC2 Capacity Blocks for ML reservation rates (effective instance-hour, paid up front): a copy of "
       "aws.amazon.com/ec2/capacityblocks/pricing whose rates applied until 2025-01-01 ('scheduled to be "
       "updated on January 1, 2025'), read 2026-11-29"},
      {kEc2UsWest2EuWest1,
       "CPU instances in us-west-2 and eu-west-1: omrdev1/greenops-cli factors.json at commit "
       "0e40d4375ca1ad758652f1821c5ae14f54b7fe97, aws.pricing_usd_per_hour.<region> (its metadata: "
       "'updated_at 2026-09-09', pricing_aws 'aws-public-pricing-api-2026-q1'), read 2026-11-29"},
      {kUsWest2EbsNat,
       "EBS gp3 (0.08 USD per GB-month) and NAT gateway (0.045 USD per gateway-hour, data per GB extra) in "
       "us-west-2: patrick-hudson/eks-terraform-arcade docs/cost-and-cleanup.md at commit "
       "e53103d44c5e9b0dc5ebd84840f37f18024133ec, 'checked against AWS's public regional price lists on "
       "October 4, 2026' (AmazonEC2 us-west-2 offer file, USW2-EBS:VolumeUsage.gp3 and "
       "USW2-NatGateway-Hours), read 2026-11-29"},
      {kNatEuWest1,
       "NAT gateway in eu-west-1, 0.048 USD per gateway-hour (EU-NatGateway-Hours; 0.048 USD per GB "
       "processed extra): AWS's offer file pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/"
       "20260925174521/eu-west-1/index.json (publicationDate 2026-09-25), as a verbatim extract with "
       "README-amazonec2-capture.md ('retrieved anonymously on 2026-10-02') in a public GitHub test fixture, "
       "read 2026-11-29"},
      {kFsxUsWest2,
       "FSx for Lustre in us-west-2: the AmazonFSx us-west-2 offer file as checked 2026-07-14 in "
       "Daylily-Informatics/daylily-ephemeral-cluster's planning notes 'DYEC Regional FSx Persistent_2 "
       "Solution Proposal' (SCRATCH_2 0.140, PERSISTENT_2 at 250 MB/s/TiB 0.210, PERSISTENT_1 at 200 "
       "0.290 USD/GB-month) and 'FSx Scratch_2 vs Persistent_1 Analysis Ledger' (USW2-Storage 0.14, "
       "USW2-Storage.SSD.200 0.29), read 2026-11-29"},
  };
  return sources;
}

std::string price_source_text(const std::string& id) {
  for (const auto& s : price_sources())
    if (id == s.id) return s.text;
  return "";
}

const InstancePrice* instance_price(const std::string& region, const std::string& instance_type) {
  // region, instance type, USD per hour, source
  static const std::vector<InstancePrice> table = {
      {"us-east-1", "g4dn.xlarge", 0.526, kVantageGpu},
      {"us-east-1", "g4dn.2xlarge", 0.752, kVantageGpu},
      {"us-east-1", "g4dn.12xlarge", 3.912, kVantageGpu},
      {"us-east-1", "g4dn.metal", 7.824, kVantageGpu},
      {"us-east-1", "g5.xlarge", 1.006, kVantageGpu},
      {"us-east-1", "g5.12xlarge", 5.672, kVantageGpu},
      {"us-east-1", "g5.48xlarge", 16.288, kVantageGpu},
      {"us-east-1", "g6.xlarge", 0.8048, kVantageGpu},
      {"us-east-1", "g6.12xlarge", 4.6016, kVantageGpu},
      {"us-east-1", "g6.48xlarge", 13.3504, kVantageGpu},
      {"us-east-1", "p3.2xlarge", 3.06, kVantageGpu},
      {"us-east-1", "p3.8xlarge", 12.24, kVantageGpu},
      {"us-east-1", "p3.16xlarge", 24.48, kVantageGpu},
      {"us-east-1", "p3dn.24xlarge", 31.212, kVantageGpu},
      {"us-east-1", "p4d.24xlarge", 21.957642, kVantageGpu},
      {"us-east-1", "p4de.24xlarge", 27.44705, kVantageGpu},
      {"us-east-1", "p5.48xlarge", 55.04, kVantageGpu},
      {"us-east-1", "trn1.32xlarge", 21.5, kVantageGpu},
      {"us-west-2", "g4dn.xlarge", 0.526, kVantageGpu},
      {"us-west-2", "g4dn.2xlarge", 0.752, kVantageGpu},
      {"us-west-2", "g4dn.12xlarge", 3.912, kVantageGpu},
      {"us-west-2", "g4dn.metal", 7.824, kVantageGpu},
      {"us-west-2", "g5.xlarge", 1.006, kVantageGpu},
      {"us-west-2", "g5.12xlarge", 5.672, kVantageGpu},
      {"us-west-2", "g5.48xlarge", 16.288, kVantageGpu},
      {"us-west-2", "g6.xlarge", 0.8048, kVantageGpu},
      {"us-west-2", "g6.12xlarge", 4.6016, kVantageGpu},
      {"us-west-2", "g6.48xlarge", 13.3504, kVantageGpu},
      {"us-west-2", "p3.2xlarge", 3.06, kVantageGpu},
      {"us-west-2", "p3.8xlarge", 12.24, kVantageGpu},
      {"us-west-2", "p3.16xlarge", 24.48, kVantageGpu},
      {"us-west-2", "p3dn.24xlarge", 31.212, kVantageGpu},
      {"us-west-2", "p4d.24xlarge", 21.95764, kVantageGpu},
      {"us-west-2", "p4de.24xlarge", 27.44705, kVantageGpu},
      {"us-west-2", "p5.48xlarge", 55.04, kVantageGpu},
      {"us-west-2", "trn1.32xlarge", 21.5, kVantageGpu},
      {"eu-west-1", "g4dn.xlarge", 0.587, kVantageGpu},
      {"eu-west-1", "g4dn.2xlarge", 0.838, kVantageGpu},
      {"eu-west-1", "g4dn.12xlarge", 4.362, kVantageGpu},
      {"eu-west-1", "g4dn.metal", 8.724, kVantageGpu},
      {"eu-west-1", "g5.xlarge", 1.123, kVantageGpu},
      {"eu-west-1", "g5.12xlarge", 6.33167, kVantageGpu},
      {"eu-west-1", "g5.48xlarge", 18.18233, kVantageGpu},
      {"eu-west-1", "p3.2xlarge", 3.305, kVantageGpu},
      {"eu-west-1", "p3.8xlarge", 13.22, kVantageGpu},
      {"eu-west-1", "p3.16xlarge", 26.44, kVantageGpu},
      {"eu-west-1", "p3dn.24xlarge", 33.711, kVantageGpu},
      {"eu-west-1", "p4d.24xlarge", 23.71569, kVantageGpu},
      {"us-east-1", "c5.xlarge", 0.17, kEc2UsEast1},
      {"us-east-1", "c5.2xlarge", 0.34, kEc2UsEast1},
      {"us-east-1", "c5.4xlarge", 0.68, kEc2UsEast1},
      {"us-east-1", "c6i.xlarge", 0.17, kEc2UsEast1},
      {"us-east-1", "m5.xlarge", 0.192, kEc2UsEast1},
      {"us-east-1", "m6i.xlarge", 0.192, kEc2UsEast1},
      {"us-west-2", "c5.xlarge", 0.17, kEc2UsWest2EuWest1},
      {"us-west-2", "c5.2xlarge", 0.34, kEc2UsWest2EuWest1},
      {"us-west-2", "c5.4xlarge", 0.68, kEc2UsWest2EuWest1},
      {"us-west-2", "m5.xlarge", 0.192, kEc2UsWest2EuWest1},
      {"eu-west-1", "c5.xlarge", 0.192, kEc2UsWest2EuWest1},
      {"eu-west-1", "c5.2xlarge", 0.384, kEc2UsWest2EuWest1},
      {"eu-west-1", "c5.4xlarge", 0.768, kEc2UsWest2EuWest1},
      {"eu-west-1", "m5.xlarge", 0.214, kEc2UsWest2EuWest1},
  };
  for (const auto& p : table)
    if (region == p.region && instance_type == p.instance_type) return &p;
  return nullptr;
}

const FsxPrice* fsx_price(const std::string& region, const std::string& deployment_type,
                          int throughput_per_tib) {
  // region, deployment type, MB/s/TiB (0: SCRATCH), USD per GB-month, source
  static const std::vector<FsxPrice> table = {
      {"us-east-1", "SCRATCH_2", 0, 0.140, kFsxUsEast1},
      {"us-east-1", "PERSISTENT_2", 125, 0.145, kFsxUsEast1},
      {"us-west-2", "SCRATCH_2", 0, 0.140, kFsxUsWest2},
      {"us-west-2", "PERSISTENT_1", 200, 0.290, kFsxUsWest2},
      {"us-west-2", "PERSISTENT_2", 250, 0.210, kFsxUsWest2},
  };
  const bool scratch = deployment_type.rfind("SCRATCH", 0) == 0;
  for (const auto& p : table)
    if (region == p.region && deployment_type == p.deployment_type &&
        (scratch || throughput_per_tib == p.throughput_per_tib))
      return &p;
  return nullptr;
}

const ServicePrice* service_price(const std::string& region, const std::string& item) {
  // region ("*": all), item, USD, per, source
  static const std::vector<ServicePrice> table = {
      {"us-east-1", kPriceNatGatewayHour, 0.045, "hour", kNatUsEast1},
      {"*", kPricePublicIpv4Hour, 0.005, "hour", kIpv4},
      {"us-east-1", kPriceEbsGp3GbMonth, 0.08, "GB-month", kEbsUsEast1},
      {"us-west-2", kPriceNatGatewayHour, 0.045, "hour", kUsWest2EbsNat},
      {"us-west-2", kPriceEbsGp3GbMonth, 0.08, "GB-month", kUsWest2EbsNat},
      {"eu-west-1", kPriceNatGatewayHour, 0.048, "hour", kNatEuWest1},
  };
  for (const auto& p : table)
    if ((region == p.region || std::string(p.region) == "*") && item == p.item) return &p;
  return nullptr;
}

const CapacityBlockPrice* capacity_block_price(const std::string& region, const std::string& instance_type) {
  // region, instance type, USD per instance-hour, valid until, source
  static const std::vector<CapacityBlockPrice> table = {
      {"us-east-1", "p5.48xlarge", 39.33, "2024-12-31", kCapacityBlocks},
      {"us-east-2", "p5.48xlarge", 39.33, "2024-12-31", kCapacityBlocks},
      {"us-east-2", "p4d.24xlarge", 14.75, "2024-12-31", kCapacityBlocks},
      {"us-west-2", "p4d.24xlarge", 14.75, "2024-12-31", kCapacityBlocks},
  };
  for (const auto& p : table)
    if (region == p.region && instance_type == p.instance_type) return &p;
  return nullptr;
}

}  // namespace pcdino::cluster
