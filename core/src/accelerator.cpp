#include "pcdino/core/accelerator.hpp"

namespace pcdino {

std::string unsupported_accelerator(const std::string& accelerator) {
  if (accelerator == "habana" || accelerator == "hpu") {
    return "pcdino does not train or extract on Intel Gaudi (HPU): its trainer is a C++ program linked "
           "against a stock LibTorch, which has no HPU device; Intel's HPU support lives in its own torch "
           "build with the habana_frameworks plugins. Train on Gaudi with Intel's PyTorch (DINO's "
           "main_dino.py with "
           "habana_frameworks.torch), or run pcdino on NVIDIA or CPU nodes (slurm.accelerator: auto, nvidia "
           "or cpu); pcdino's image (accelerator: habana), SPANK profile (habana) and doctor serve Gaudi "
           "nodes";
  }
  if (accelerator == "neuron") {
    return "pcdino does not train or extract on AWS Trainium or Inferentia (NeuronCores): its trainer is a "
           "LibTorch C++ program, and Neuron's training runs through PyTorch/XLA in Python (AWS: \"not "
           "currently possible to set up an environment to use torch in C++\" with Neuron's XLA "
           "execution; C++ inference of traced models exists, and pcdino's extraction does not use it). "
           "Train on Trainium with torch-neuronx, or run pcdino on NVIDIA or CPU nodes "
           "(slurm.accelerator: auto, nvidia or cpu); pcdino's image (accelerator: neuron), SPANK profile "
           "(neuron) and doctor serve Neuron nodes";
  }
  return "";
}

}  // namespace pcdino
