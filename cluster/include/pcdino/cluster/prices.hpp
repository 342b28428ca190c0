// AWS prices that `pcdino cluster cost` uses, per region, each row with the source it was read from and
// when. A price that is not in a table is absent (the lookups return nullptr): the report names it, it is
// never zero and never another region's price.
#pragma once

#include <string>
#include <vector>

namespace pcdino::cluster {

/// Where a group of rows was read, and when ("instances.vantage.sh data ..., read 2026-11-29").
struct PriceSource {
  const char* id;    ///< short key the rows name ("vantage-gpu-2026-01")
  const char* text;  ///< what a reader needs to find it again: page or file, its date, when it was read
};

/// On-demand Linux price of one instance type in one region, USD per instance-hour.
struct InstancePrice {
  const char* region;
  const char* instance_type;
  double usd_per_hour;
  const char* source;  ///< a PriceSource id
};

/// FSx for Lustre SSD storage price for a deployment type and throughput tier, USD per GB-month (the
/// throughput is included in the storage price; SCRATCH types have no tier: throughput 0).
struct FsxPrice {
  const char* region;
  const char* deployment_type;  ///< SCRATCH_2, PERSISTENT_1, PERSISTENT_2
  int throughput_per_tib;       ///< MB/s/TiB; 0 for SCRATCH
  double usd_per_gb_month;
  const char* source;
};

/// A per-hour or per-GB-month price of something the cluster creates besides instances and FSx.
struct ServicePrice {
  const char* region;  ///< "*": the same in every commercial region (the source says so)
  const char* item;    ///< one of the kPrice* item names below
  double usd;          ///< per `unit`
  const char* unit;    ///< "hour" or "GB-month"
  const char* source;
};

/// EC2 Capacity Block reservation rate: the effective price per instance-hour AWS charged up front for a
/// block bought while the row was valid (AWS updates these rates; the purchase quotes the block's fee).
struct CapacityBlockPrice {
  const char* region;
  const char* instance_type;
  double usd_per_instance_hour;
  const char* valid_until;  ///< last day the rate applied, YYYY-MM-DD
  const char* source;
};

/// ServicePrice items.
inline constexpr const char* kPriceNatGatewayHour = "NAT gateway";  ///< per gateway-hour (data per GB extra)
inline constexpr const char* kPricePublicIpv4Hour = "public IPv4 address";  ///< per address-hour
inline constexpr const char* kPriceEbsGp3GbMonth = "EBS gp3";               ///< per GB-month of volume

/// Hours in AWS's pricing month: a GB-month price / 730 is its price per GB-hour.
inline constexpr double kHoursPerMonth = 730.0;

/// Every source the tables cite.
const std::vector<PriceSource>& price_sources();

/// The source text of `id` ("" if unknown).
std::string price_source_text(const std::string& id);

/// The on-demand Linux price of `instance_type` in `region`, or nullptr if the table has none.
const InstancePrice* instance_price(const std::string& region, const std::string& instance_type);

/// The FSx for Lustre price of a deployment type and throughput (MB/s/TiB; ignored for SCRATCH types) in
/// `region`, or nullptr if the table has none.
const FsxPrice* fsx_price(const std::string& region, const std::string& deployment_type,
                          int throughput_per_tib);

/// The price of `item` (a kPrice* name) in `region` (a "*" row serves every region), or nullptr.
const ServicePrice* service_price(const std::string& region, const std::string& item);

/// The last capacity block rate the table has for `instance_type` in `region`, or nullptr.
const CapacityBlockPrice* capacity_block_price(const std::string& region, const std::string& instance_type);

}  // namespace pcdino::cluster
