// Facts about AWS that the validators and the cost estimate need, each table with its source and the
// date it was read, because AWS's rules move.
#pragma once

#include <string>
#include <vector>

namespace pcdino::cluster {

/// One EC2 instance type.
struct InstanceType {
  std::string name;
  int vcpus = 0;
  double memory_gib = 0;
  int gpus = 0;                  ///< GPUs or other accelerators (gpu_model names them)
  std::string gpu_model;         ///< "" if none
  bool efa = false;              ///< EFA supported
  int max_efa_interfaces = 0;    ///< network cards that can carry an EFA interface
  int instance_store_disks = 0;  ///< 0: EBS only
  int instance_store_gb = 0;     ///< total
  double network_gbps = 0;       ///< "up to" figures as their maximum
  double price_per_hour = 0;     ///< on-demand Linux, USD, in kPriceRegion; 0 if not in the price table
};

/// Where and when the instance facts and prices were read.
extern const char* const kInstanceSource;
extern const char* const kPriceSource;
extern const char* const kPriceRegion;

/// The catalogue entry for `name`, or nullptr if the catalogue does not know it.
const InstanceType* find_instance(const std::string& name);

/// Every known type (for messages).
const std::vector<InstanceType>& instance_catalogue();

/// Where the one FSx fact that ParallelCluster does not check (S3 links of PERSISTENT_2) comes from.
extern const char* const kFsxSource;

/// FSx for Lustre price in USD per GB-month for a deployment type and throughput (0 if unknown).
double fsx_price_per_gb_month(const std::string& deployment_type, int throughput);

}  // namespace pcdino::cluster
