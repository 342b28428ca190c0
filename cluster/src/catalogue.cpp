#include "pcdino/cluster/catalogue.hpp"

namespace pcdino::cluster {

const char* const kInstanceSource =
    "instance facts read 2026-11-22 from instances.vantage.sh data (tsaol/aws-gpu data/*_instances.js), "
    "torchx specs/named_resources_aws.py and eksctl pkg/utils/instance/instance_types.go (EFA, instance "
    "store)";
const char* const kFsxSource =
    "FSx for Lustre API CreateFileSystem: PERSISTENT_2 links S3 only through data repository associations "
    "(read 2026-11-22)";

// Not re-read from a source on 2026-11-22 (taken from AWS's instance pages as remembered; check before
// relying on them): the g6 sizes, dl1.24xlarge, vCPU/memory/bandwidth of c5.xlarge/2xlarge/4xlarge,
// c5n.18xlarge, c6i.*, m5.*, m6i.*, and the instance store of g4dn.metal, g5.48xlarge and trn1.32xlarge.
const std::vector<InstanceType>& instance_catalogue() {
  // name, vCPUs, GiB, accelerators, model, EFA, EFA interfaces, store disks, store GB, Gbps
  static const std::vector<InstanceType> table = {
      {"g4dn.xlarge", 4, 16, 1, "T4", false, 0, 1, 125, 25},
      {"g4dn.2xlarge", 8, 32, 1, "T4", false, 0, 1, 225, 25},
      {"g4dn.12xlarge", 48, 192, 4, "T4", true, 1, 1, 900, 50},
      {"g4dn.metal", 96, 384, 8, "T4", true, 1, 2, 1800, 100},
      {"g5.xlarge", 4, 16, 1, "A10G", false, 0, 1, 250, 10},
      {"g5.12xlarge", 48, 192, 4, "A10G", true, 1, 1, 3800, 40},
      {"g5.48xlarge", 192, 768, 8, "A10G", true, 1, 2, 7600, 100},
      {"g6.xlarge", 4, 16, 1, "L4", false, 0, 1, 250, 10},
      {"g6.12xlarge", 48, 192, 4, "L4", true, 1, 4, 3760, 40},
      {"g6.48xlarge", 192, 768, 8, "L4", true, 1, 8, 7520, 100},
      {"p3.2xlarge", 8, 61, 1, "V100", false, 0, 0, 0, 10},
      {"p3.8xlarge", 32, 244, 4, "V100", false, 0, 0, 0, 10},
      {"p3.16xlarge", 64, 488, 8, "V100", false, 0, 0, 0, 25},
      {"p3dn.24xlarge", 96, 768, 8, "V100", true, 1, 2, 1800, 100},
      {"p4d.24xlarge", 96, 1152, 8, "A100 40GB", true, 4, 8, 8000, 400},
      {"p4de.24xlarge", 96, 1152, 8, "A100 80GB", true, 4, 8, 8000, 400},
      {"p5.48xlarge", 192, 2048, 8, "H100 80GB", true, 32, 8, 30720, 3200},
      {"trn1.32xlarge", 128, 512, 16, "Trainium", true, 8, 4, 7600, 800},
      {"dl1.24xlarge", 96, 768, 8, "Gaudi", true, 4, 4, 4000, 400},
      {"c5.xlarge", 4, 8, 0, "", false, 0, 0, 0, 10},
      {"c5.2xlarge", 8, 16, 0, "", false, 0, 0, 0, 10},
      {"c5.4xlarge", 16, 32, 0, "", false, 0, 0, 0, 10},
      {"c5.18xlarge", 72, 144, 0, "", false, 0, 0, 0, 25},
      {"c5n.18xlarge", 72, 192, 0, "", true, 1, 0, 0, 100},
      {"c6i.xlarge", 4, 8, 0, "", false, 0, 0, 0, 12.5},
      {"c6i.32xlarge", 128, 256, 0, "", true, 1, 0, 0, 50},
      {"m5.xlarge", 4, 16, 0, "", false, 0, 0, 0, 10},
      {"m5.24xlarge", 96, 384, 0, "", false, 0, 0, 0, 25},
      {"m6i.xlarge", 4, 16, 0, "", false, 0, 0, 0, 12.5},
      {"m6i.32xlarge", 128, 512, 0, "", true, 1, 0, 0, 50},
  };
  return table;
}

const InstanceType* find_instance(const std::string& name) {
  for (const auto& t : instance_catalogue()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace pcdino::cluster
