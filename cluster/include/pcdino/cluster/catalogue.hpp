// Facts about AWS instances that the validators and the generator need, each table with its source and
// the date it was read, because AWS's rules move. Prices are in prices.hpp.
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
};

/// Where and when the instance facts were read (prices: prices.hpp, per region).
extern const char* const kInstanceSource;

/// The catalogue entry for `name`, or nullptr if the catalogue does not know it.
const InstanceType* find_instance(const std::string& name);

/// Every known type (for messages).
const std::vector<InstanceType>& instance_catalogue();

/// Where the one FSx fact that ParallelCluster does not check (S3 links of PERSISTENT_2) comes from.
extern const char* const kFsxSource;

}  // namespace pcdino::cluster
