// Accelerators pcdino prepares nodes for but cannot compute on. Its trainer and extractor are LibTorch C++
// programs; neither Intel (Gaudi) nor AWS (Trainium, Inferentia) provides a device backend for them:
// - Intel Gaudi: the HPU backend comes as Intel's own torch build with the habana_frameworks Python plugins
//   (docs.habana.ai, Installation Guide and PyTorch Support Matrix, 1.21-1.23);
// - AWS Neuron: training runs through PyTorch/XLA (torch-neuronx) in Python; "It is not currently possible to
//   set up an environment to use torch in C++ in conjunction with Neuron XLA LazyTensor execution"
//   (aws-neuron-sdk, torch-neuronx programming guide, trace-vs-xla-lazytensor).
// pcdino's images, SPANK profiles and doctor serve those nodes; training and extraction there are refused.
#pragma once

#include <string>

namespace pcdino {

/// The refusal for running a stage on `accelerator`: "habana"/"hpu" (Intel Gaudi) or "neuron" (AWS
/// Trainium/Inferentia): why, and what to use instead. "" for every other name (pcdino computes on
/// NVIDIA GPUs and CPUs).
std::string unsupported_accelerator(const std::string& accelerator);

}  // namespace pcdino
