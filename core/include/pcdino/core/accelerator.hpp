// Accelerators pcdino prepares nodes for but cannot compute on. Its trainer and extractor are C++ programs
// linked against a stock LibTorch, which has no device for either:
// - Intel Gaudi: the HPU device exists only inside Intel's own torch build with the habana_frameworks
//   plugins (docs.habana.ai Installation Guide; the 1.23 PyTorch Support Matrix lists C++ with limits,
//   within that build), not in a LibTorch pcdino can link;
// - AWS Neuron: training runs through PyTorch/XLA (torch-neuronx) in Python; "It is not currently possible to
//   set up an environment to use torch in C++ in conjunction with Neuron XLA LazyTensor execution"
//   (aws-neuron-sdk, torch-neuronx programming guide, trace-vs-xla-lazytensor). C++ inference of traced
//   models (libtorchneuron) exists, and pcdino's extraction does not use it.
// pcdino's images, SPANK profiles and doctor serve those nodes; training and extraction there are refused.
#pragma once

#include <string>

namespace pcdino {

/// The refusal for running a stage on `accelerator`: "habana"/"hpu" (Intel Gaudi) or "neuron" (AWS
/// Trainium/Inferentia): why, and what to use instead. "" for every other name (pcdino computes on
/// NVIDIA GPUs and CPUs).
std::string unsupported_accelerator(const std::string& accelerator);

}  // namespace pcdino
