// The accelerator kinds a node may carry, one row each: what every component reads about a kind. This
// table is the one place that lists them; a kind's own facts live in files named after it:
// - ami/src/<kind>.cpp and ami/src/recipes/<kind>.cpp: its image (pinned components, releases, instance
//   types, compatibility rules, recipes), listed in cmake/accelerators.cmake;
// - doctor/src/<kind>.cpp (kinds other than NVIDIA, whose GPU checks are the doctor's own): its probe,
//   judge and collectives test;
// - spank, cluster, train and the pipeline configuration read this table only.
// A new kind is a row here, its name in cmake/accelerators.cmake, and those files.
//
// pcdino computes on NVIDIA GPUs and CPUs. Its trainer and extractor are C++ programs linked against a
// stock LibTorch, which has a device for neither of the other kinds:
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
#include <vector>

namespace pcdino {

/// One accelerator kind.
struct AcceleratorKind {
  const char* name;    ///< its name everywhere: an image spec's `accelerator:`, a SPANK profile's name
  const char* vendor;  ///< what the devices are, for messages
  /// LibTorch's device type pcdino's stages compute on there ("cuda"); "" where LibTorch has none.
  const char* torch_device;
  /// The SPANK profile's `devices:` value that binds its devices ("cuda" for NVIDIA's).
  const char* spank_devices;
  /// The variable that lists a task's devices (Slurm's own for GPUs; the vendor runtime's otherwise).
  const char* visible_devices_variable;
  /// The variable the vendor's collectives find rank 0 by (IP:port), set per job by the SPANK plugin; ""
  /// where the collectives need none (NCCL takes its id from the program).
  const char* root_comm_variable;
  /// The device models of the instance types that carry the kind, as the cluster catalogue names them;
  /// empty for NVIDIA, whose GPUs every other catalogue entry with GPUs has.
  std::vector<const char*> instance_devices;
  /// Whether ParallelCluster generates Slurm GRES for its devices (NVIDIA GPUs only): without them two
  /// jobs on a node would both see all devices, so a queue of the kind gets one job per node.
  bool slurm_gres;
  /// --device names that mean the kind ("hpu": LibTorch's name for Gaudi).
  std::vector<const char*> device_names;
  /// Why pcdino does not train or extract there, and what to use instead; "" where it does.
  const char* unsupported;
};

/// Every kind, in the order messages list them.
const std::vector<AcceleratorKind>& accelerator_kinds();

/// The row named `name`, or of which `name` is a --device name; nullptr for any other name.
const AcceleratorKind* accelerator_kind(const std::string& name);

/// The row of an instance type's device model (the cluster catalogue's `gpu_model`); nullptr for NVIDIA
/// GPUs and CPUs.
const AcceleratorKind* accelerator_of_device(const std::string& device_model);

/// The kinds' names joined by `separator` ("nvidia, habana, neuron"); `field` picks another column.
std::string accelerator_names(const std::string& separator,
                              const char* AcceleratorKind::*field = &AcceleratorKind::name);

/// The names of the kinds pcdino does not compute on, joined by `separator` ("habana and neuron").
std::string unsupported_accelerator_names(const std::string& separator);

/// The refusal for running a stage on `accelerator` (a kind's name or --device name of a kind that pcdino
/// does not compute on): why, and what to use instead. "" for every other name.
std::string unsupported_accelerator(const std::string& accelerator);

}  // namespace pcdino
