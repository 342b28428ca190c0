// The doctor's probe of AWS Neuron nodes (Inferentia and Trainium): the neuron kernel module, the device
// files and neuron-ls, judged against the node's instance type (ami/accelerators.hpp), and nccom-test, the
// Neuron collectives' test, where installed; the row neuron_probe() of vendor_probes().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/doctor/accelerators.hpp"

namespace pcdino::doctor {

/// One Neuron device as `neuron-ls --json-output` lists it (aws-neuron-sdk tools/neuron-sys-tools/
/// neuron-ls.rst, 2.22: neuron_device, nc_count, memory_size).
struct NeuronDevice {
  int index = 0;                   ///< neuron_device
  int cores = 0;                   ///< nc_count: NeuronCores as the runtime shows them (logical on trn2)
  std::uint64_t memory_bytes = 0;  ///< memory_size
};

/// Parses neuron-ls's JSON (an array of devices). Throws DataError for text that is not that JSON.
std::vector<NeuronDevice> parse_neuron_ls(const std::string& json);

/// Neuron device files under `dev` (/dev/neuron<N>).
int neuron_device_files(const std::string& dev = "/dev");

/// The check "neuron": "not present" (ok) when the node has no Neuron device, module or neuron-ls and its
/// instance type (`instance_type`, "" if unknown) carries none; otherwise fails on the neuron module not
/// loaded, neuron-ls missing or failing, fewer devices than the instance type has, or a device with fewer
/// NeuronCores than its type shows. A neuron-ls without JSON output (before Neuron 2.22) is judged on the
/// device files.
Check judge_neuron(const VendorNode& node, const std::string& instance_type);

/// The bus bandwidth `nccom-test` reports: its closing "Avg bus bandwidth: 40.6901GB/s" line (GiB/s, 2^30
/// bytes; aws-neuron-sdk tools/neuron-sys-tools/nccom-test.rst), else the busbw(GB/s) column of its last
/// row. Throws DataError when the output has neither.
double parse_nccom_busbw(const std::string& output);

/// On a Neuron node with `nccom-test` installed (aws-neuronx-tools): an all-reduce across the node's
/// `cores` NeuronCores (`nccom-test -r CORES allr`, the tool's defaults), judged only on running; the
/// check "nccom" with its bus bandwidth. nullopt when the node has no Neuron device or no nccom-test (the
/// check is optional).
std::optional<Check> check_nccom(int cores, double seconds);

/// Runs the probe on this node: the facts above with neuron-ls under a time limit of `seconds`.
VendorNode probe_neuron(double seconds);

/// The row of vendor_probes(): the check "neuron" (judge_neuron()), and with healthy devices check_nccom()
/// across the NeuronCores neuron-ls shows, in place of NCCL's sweep.
VendorProbe neuron_probe();

}  // namespace pcdino::doctor
