// AWS Trainium and Inferentia nodes (accelerator: neuron): the Neuron SDK releases, the package versions,
// OSes and instance families of each, restated as a table with its sources, so that `pcdino ami check`
// refuses an image AWS does not support. The EC2 instance types with Neuron devices are rows of
// accelerator_instances() (accelerators.hpp).
//
// pcdino trains and extracts with LibTorch's C++ API, which AWS does not provide for Neuron devices
// (Neuron's training runs through PyTorch/XLA in Python). On these nodes pcdino prepares the image, the job
// environment and the health checks; training is refused (core/accelerator.hpp).
#pragma once

#include <string>
#include <vector>

namespace pcdino::ami {

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

}  // namespace pcdino::ami
