#include "pcdino/core/accelerator.hpp"

#include <algorithm>

namespace pcdino {

const std::vector<AcceleratorKind>& accelerator_kinds() {
  static const std::vector<AcceleratorKind> kinds = {
      {"nvidia", "NVIDIA GPUs", "cuda", "cuda", "CUDA_VISIBLE_DEVICES", "", {}, true, {}, ""},
      {"habana",
       "Intel Gaudi (HPU)",
       "",
       "habana",
       // Gaudi module ids (docs.habana.ai, Multiple Tenants); Intel HCL's "IP:port string to create the
       // communicator" (hcl_global_conf.cpp).
       "HABANA_VISIBLE_MODULES",
       "HCCL_COMM_ID",
       {"Gaudi"},
       false,
       {"hpu"},
       "pcdino does not train or extract on Intel Gaudi (HPU): its trainer is a C++ program linked "
       "against a stock LibTorch, which has no HPU device; Intel's HPU support lives in its own torch "
       "build with the habana_frameworks plugins. Train on Gaudi with Intel's PyTorch (DINO's "
       "main_dino.py with "
       "habana_frameworks.torch), or run pcdino on NVIDIA or CPU nodes (slurm.accelerator: auto, nvidia "
       "or cpu); pcdino's image (accelerator: habana), SPANK profile (habana) and doctor serve Gaudi "
       "nodes"},
      {"neuron",
       "AWS Trainium/Inferentia (NeuronCores)",
       "",
       "neuron",
       // NeuronCore ids; the Neuron runtime's "IP address and ... port for the rank 0 worker", mandatory for
       // collectives.
       "NEURON_RT_VISIBLE_CORES",
       "NEURON_RT_ROOT_COMM_ID",
       {"Trainium"},
       false,
       {},
       "pcdino does not train or extract on AWS Trainium or Inferentia (NeuronCores): its trainer is a "
       "LibTorch C++ program, and Neuron's training runs through PyTorch/XLA in Python (AWS: \"not "
       "currently possible to set up an environment to use torch in C++\" with Neuron's XLA "
       "execution; C++ inference of traced models exists, and pcdino's extraction does not use it). "
       "Train on Trainium with torch-neuronx, or run pcdino on NVIDIA or CPU nodes "
       "(slurm.accelerator: auto, nvidia or cpu); pcdino's image (accelerator: neuron), SPANK profile "
       "(neuron) and doctor serve Neuron nodes"},
  };
  return kinds;
}

const AcceleratorKind* accelerator_kind(const std::string& name) {
  for (const auto& k : accelerator_kinds()) {
    if (name == k.name) return &k;
    for (const char* alias : k.device_names) {
      if (name == alias) return &k;
    }
  }
  return nullptr;
}

const AcceleratorKind* accelerator_of_device(const std::string& device_model) {
  for (const auto& k : accelerator_kinds()) {
    if (std::find(k.instance_devices.begin(), k.instance_devices.end(), device_model) !=
        k.instance_devices.end())
      return &k;
  }
  return nullptr;
}

std::string accelerator_names(const std::string& separator, const char* AcceleratorKind::*field) {
  std::string out;
  for (const auto& k : accelerator_kinds()) out += (out.empty() ? "" : separator) + std::string(k.*field);
  return out;
}

std::string unsupported_accelerator_names(const std::string& separator) {
  std::string out;
  for (const auto& k : accelerator_kinds()) {
    if (*k.unsupported != '\0') out += (out.empty() ? "" : separator) + std::string(k.name);
  }
  return out;
}

std::string unsupported_accelerator(const std::string& accelerator) {
  const AcceleratorKind* k = accelerator_kind(accelerator);
  return k != nullptr ? k->unsupported : "";
}

}  // namespace pcdino
