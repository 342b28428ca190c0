#include "pcdino/ami/accelerators.hpp"

namespace pcdino::ami {

const std::vector<GaudiRelease>& gaudi_releases() {
  // Each matrix page lists the devices it covers and the OSes. Amazon Linux 2 is last listed in 1.13,
  // first-generation Gaudi in 1.21 (1.22's page covers "Gaudi 2 ... and Gaudi 3" only); Amazon Linux 2023
  // never. Ubuntu 20.04 and 24.04 are not base.os values and are left out. Not confirmed: the 1.20 page
  // itself (not retrieved; 1.19's and 1.21's rows agree), and for 1.16-1.21 whether the OS list read is the
  // first-generation table's or the combined one's (both list Ubuntu 22.04).
  static const std::vector<GaudiRelease> table = {
      {"1.13", true, {"ubuntu2204", "alinux2"}, "docs.habana.ai Support_Matrix_v1.13.0"},
      {"1.14",
       true,
       {"ubuntu2204"},
       "docs.habana.ai Support_Matrix_v1.14.0 (release notes 1.14.0: Ubuntu 20.04 removed)"},
      {"1.15", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.15.0"},
      {"1.16", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.16.0"},
      {"1.17", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.17.0"},
      {"1.18", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.18.0"},
      {"1.19", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.19.0"},
      {"1.20", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.20.0"},
      {"1.21", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.21.0"},
      {"1.22", false, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.22.0 (Gaudi 2 and Gaudi 3 only)"},
      {"1.23", false, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.23.0 (Gaudi 2 and Gaudi 3 only)"},
  };
  return table;
}

const std::vector<NeuronRelease>& neuron_releases() {
  // Package versions: n2-manifest.json's trn1/inf2/trn2 entries. OSes: the runtime's last Amazon Linux 2
  // release is 2.19 (announce-eos-al2, announce-no-support-al2: from 2.20 only the driver supports it);
  // trn2 from 2.21 (release notes 2.21.0).
  static const std::vector<NeuronRelease> table = {
      {"2.19.0",
       "2.17.17.0",
       "2.21.41.0",
       "2.21.46.0",
       "2.18.3.0",
       {"ubuntu2204", "alinux2", "alinux2023"},
       {"trn1", "trn1n", "inf2"},
       "aws-neuron-sdk v2.19.0 src/helperscripts/n2-manifest.json, release notes 07/03/2024"},
      {"2.20.0",
       "2.18.12.0",
       "2.22.14.0",
       "2.22.26.0",
       "2.19.0.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2"},
       "aws-neuron-sdk v2.20.0 src/helperscripts/n2-manifest.json; announce-no-support-al2.rst"},
      {"2.21.0",
       "2.19.64.0",
       "2.23.110.0",
       "2.23.133.0",
       "2.20.204.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.21.0 src/helperscripts/n2-manifest.json; release notes 2.21.0 (Trn2)"},
      {"2.22.0",
       "2.20.28.0",
       "2.24.53.0",
       "2.24.59.0",
       "2.22.61.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.22.0 src/helperscripts/n2-manifest.json"},
      {"2.23.0",
       "2.21.37.0",
       "2.25.57.0",
       "2.25.65.0",
       "2.23.9.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.23.0 src/helperscripts/n2-manifest.json; announce-no-support-ubuntu-20-base.rst"},
  };
  return table;
}

const NeuronRelease* neuron_release(const std::string& version) {
  for (const auto& r : neuron_releases())
    if (version == r.release) return &r;
  return nullptr;
}

const std::vector<AcceleratorInstance>& accelerator_instances() {
  static const char* const kDl1 =
      "AWS Compute Blog 'Amazon EC2 DL1 instances Deep Dive' (8 Gaudi, 32 GB HBM2 each; four EFA ENIs)";
  static const char* const kTrn1 =
      "aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst (16 Trainium chips of 2 "
      "NeuronCore-v2), "
      "setup-trn1-multi-node-execution.rst ('trn1.32xlarge has 8 EFA devices, trn1n.32xlarge has 16'; "
      "no EFA on the smaller sizes)";
  static const char* const kTrn2 =
      "aws-neuron-sdk trn2-arch.rst (16 Trainium2 chips of 8 NeuronCore-v3), logical-neuroncore-config.rst "
      "(LNC=2 by default: 4 logical cores per chip)";
  static const char* const kInf2 = "aws-neuron-sdk inf2-arch.rst (Inferentia2 chips of 2 NeuronCore-v2)";
  static const std::vector<AcceleratorInstance> table = {
      {"dl1.24xlarge", "habana", "HL-205", 8, 1, kDl1},
      {"trn1.2xlarge", "neuron", "Trainium", 1, 2, kTrn1},
      {"trn1.32xlarge", "neuron", "Trainium", 16, 2, kTrn1},
      {"trn1n.32xlarge", "neuron", "Trainium", 16, 2, kTrn1},
      {"trn2.48xlarge", "neuron", "Trainium2", 16, 4, kTrn2},
      {"inf2.xlarge", "neuron", "Inferentia2", 1, 2, kInf2},
      {"inf2.8xlarge", "neuron", "Inferentia2", 1, 2, kInf2},
      {"inf2.24xlarge", "neuron", "Inferentia2", 6, 2, kInf2},
      {"inf2.48xlarge", "neuron", "Inferentia2", 12, 2, kInf2},
  };
  return table;
}

const AcceleratorInstance* accelerator_instance(const std::string& instance_type) {
  for (const auto& i : accelerator_instances())
    if (instance_type == i.type) return &i;
  return nullptr;
}

std::string instance_family(const std::string& instance_type) {
  return instance_type.substr(0, instance_type.find('.'));
}

}  // namespace pcdino::ami
