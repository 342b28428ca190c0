// Intel Gaudi and AWS Trainium/Inferentia nodes: the vendors' published releases, the OSes and devices
// each supports, and the EC2 instance types that carry them, restated as tables with their sources, so
// that `pcdino ami check` refuses an image the vendor does not support and the doctor knows how many
// devices a node should show.
//
// pcdino trains and extracts with LibTorch's C++ API, which neither vendor provides for its devices
// (Intel ships its Gaudi PyTorch as its own torch wheel with Python plugins; Neuron's training runs through
// PyTorch/XLA in Python). On these nodes pcdino prepares the image, the job environment and the health
// checks; training is refused (core/accelerator.hpp).
#pragma once

#include <string>
#include <vector>

namespace pcdino::ami {

/// One Intel Gaudi software release line (major.minor): what its support matrix lists.
struct GaudiRelease {
  const char* release;          ///< "1.21"
  bool first_gen;               ///< supports first-generation Gaudi (HL-205, the DL1's card)
  std::vector<const char*> os;  ///< pcdino's OS names the matrix lists (base.os)
  const char* source;
};

/// Intel Gaudi software releases 1.13 to 1.23 (docs.habana.ai Support_Matrix_v<release>).
const std::vector<GaudiRelease>& gaudi_releases();

/// One AWS Neuron SDK release: the pinned versions of the four node packages and where they run.
struct NeuronRelease {
  const char* release;                ///< "2.22.0"
  const char* dkms;                   ///< aws-neuronx-dkms
  const char* runtime_lib;            ///< aws-neuronx-runtime-lib
  const char* collectives;            ///< aws-neuronx-collectives
  const char* tools;                  ///< aws-neuronx-tools (neuron-ls, neuron-top, nccom-test)
  std::vector<const char*> os;        ///< pcdino's OS names with the runtime supported
  std::vector<const char*> families;  ///< instance families: "trn1", "trn1n", "inf2", "trn2"
  const char* source;
};

/// Neuron SDK releases 2.19.0 to 2.23.0 (aws-neuron-sdk src/helperscripts/n2-manifest.json and the
/// release announcements).
const std::vector<NeuronRelease>& neuron_releases();

/// The release row of `version` ("2.22.0"), or nullptr.
const NeuronRelease* neuron_release(const std::string& version);

/// An EC2 instance type with Gaudi or Neuron devices.
struct AcceleratorInstance {
  const char* type;         ///< "dl1.24xlarge"
  const char* accelerator;  ///< "habana" or "neuron" (ImageSpec::accelerator)
  const char* device;       ///< "HL-205" (Gaudi), "Trainium", "Trainium2", "Inferentia2"
  int devices;              ///< cards (Gaudi) or Neuron devices (chips)
  int cores_per_device;     ///< NeuronCores per device as neuron-ls shows them by default (1 for Gaudi)
  const char* source;
};

/// Gaudi and Neuron instance types (dl1, trn1, trn1n, trn2, inf2).
const std::vector<AcceleratorInstance>& accelerator_instances();

/// The row of `instance_type`, or nullptr (NVIDIA or CPU types).
const AcceleratorInstance* accelerator_instance(const std::string& instance_type);

/// The family of an instance type: "trn1n.32xlarge" -> "trn1n".
std::string instance_family(const std::string& instance_type);

}  // namespace pcdino::ami
