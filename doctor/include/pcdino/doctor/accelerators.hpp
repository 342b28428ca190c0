// The doctor's probes of Intel Gaudi and AWS Neuron nodes: the kernel module, the device files and the
// vendor's tool (hl-smi, neuron-ls), judged against the node's instance type (ami/accelerators.hpp) and
// the image manifest. On a node with neither, each check says "not present", which is healthy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

/// One Gaudi card as `hl-smi -Q index,name,driver_version,temperature.aip -f csv,noheader` prints it
/// (field names: docs.habana.ai System Management Interface Tool; Intel Gaudi Health Screen's hl-smi query).
struct GaudiCard {
  int index = 0;
  std::string name;          ///< "HL-205" (first-generation Gaudi), "HL-225" (Gaudi 2), "HL-325L" (Gaudi 3)
  std::string driver;        ///< "1.21.0-ee698fb": release and git hash
  double temperature_c = 0;  ///< degrees Celsius; 0 means the card did not initialise (Intel)
};

/// The argv of that query, read by parse_hl_smi().
std::vector<std::string> hl_smi_query();

/// Parses hl-smi's CSV without header: one card per line, "0, HL-205, 1.21.0-ee698fb, 33 C" (units after
/// a space are dropped; blank lines skipped). Throws DataError naming the line for a line that does not
/// have the four fields or whose index or temperature is not a number.
std::vector<GaudiCard> parse_hl_smi(const std::string& csv);

/// One Neuron device as `neuron-ls --json-output` lists it (aws-neuron-sdk tools/neuron-sys-tools/
/// neuron-ls.rst, 2.22: neuron_device, nc_count, memory_size).
struct NeuronDevice {
  int index = 0;                   ///< neuron_device
  int cores = 0;                   ///< nc_count: NeuronCores as the runtime shows them (logical on trn2)
  std::uint64_t memory_bytes = 0;  ///< memory_size
};

/// Parses neuron-ls's JSON (an array of devices). Throws DataError for text that is not that JSON.
std::vector<NeuronDevice> parse_neuron_ls(const std::string& json);

/// What a node shows of one vendor's stack.
struct VendorNode {
  int device_files = 0;        ///< Gaudi: /dev/accel/accel<N> or /dev/hl<N>; Neuron: /dev/neuron<N>
  bool module_loaded = false;  ///< habanalabs / neuron in /proc/modules
  bool tool_found = false;     ///< hl-smi / neuron-ls could be started
  int tool_exit = 0;           ///< its exit status
  std::string tool_output;     ///< its stdout
  std::string tool_error;      ///< its stderr, or why it did not run
};

/// Gaudi device files under `dev` (/dev/accel/accel<N> of the habanalabs driver on kernels with the accel
/// subsystem, /dev/hl<N> before) and Neuron device files (/dev/neuron<N>).
int gaudi_device_files(const std::string& dev = "/dev");
int neuron_device_files(const std::string& dev = "/dev");

/// Whether `module` is listed in `proc_modules` (/proc/modules' format: the name first on each line).
bool module_loaded(const std::string& module, const std::string& proc_modules = "/proc/modules");

/// The check "gaudi": "not present" (ok) when the node has no Gaudi device, module or hl-smi and its
/// instance type (`instance_type`, "" if unknown) carries none; otherwise fails, naming what is wrong: the
/// habanalabs module not loaded, hl-smi missing or failing, fewer cards than the instance type has, a card
/// at 0 C (Intel: initialisation failed) or at kGaudiHotC or more, a driver other than the manifest's
/// `gaudi_software` release (X.Y.Z; "" = not compared).
Check judge_gaudi(const VendorNode& node, const std::string& instance_type,
                  const std::string& gaudi_software);

/// pcdino's limit for a card's temperature: an idle card this hot is not cooled.
inline constexpr double kGaudiHotC = 95;

/// The check "neuron": "not present" (ok) as judge_gaudi; otherwise fails on the neuron module not loaded,
/// neuron-ls missing or failing, fewer devices than the instance type has, or a device with fewer
/// NeuronCores than its type shows.
Check judge_neuron(const VendorNode& node, const std::string& instance_type);

/// Runs the probes on this node: the facts above with the tool under a time limit of `seconds`.
VendorNode probe_gaudi(double seconds);
VendorNode probe_neuron(double seconds);

}  // namespace pcdino::doctor
