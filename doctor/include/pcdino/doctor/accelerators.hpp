// The doctor's probes of Intel Gaudi and AWS Neuron nodes: the kernel module, the device files and the
// vendor's tool (hl-smi, neuron-ls), judged against the node's instance type (ami/accelerators.hpp) and
// the image manifest. On a node with neither, each check says "not present", which is healthy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

/// One Gaudi card as `hl-smi -Q index,name,driver_version,temperature.aip -f csv` prints it. Intel
/// documents the -Q/-f form and its header line (System Management Interface Tool; Multiple Dockers
/// each with Single Workload: "index, module_id"); its Health Screen queries index, name and
/// temperature.aip, read as "<n> C"; driver_version is the field name third-party tools query (Intel's
/// full field list was not read).
struct GaudiCard {
  int index = 0;             ///< the index column, else the row's position
  std::string name;          ///< "HL-205" (first-generation Gaudi), "HL-225" (Gaudi 2), "HL-325L" (Gaudi 3)
  std::string driver;        ///< "1.21.0-ee698fb": release and git hash; "" without that column
  double temperature_c = 0;  ///< degrees Celsius; 0 means the card did not initialise (Intel)
};

/// The argv of that query, read by parse_hl_smi().
std::vector<std::string> hl_smi_query();

/// Parses hl-smi's CSV by its header: the columns by name (a unit in brackets, as csv,nounits writes
/// "temperature.aip [C]", is dropped; so is a unit after a value, "33 C"), name and temperature.aip
/// required, index and driver_version optional, other columns ignored; one card per line, blank lines
/// skipped. Throws DataError for a header without the required columns, or naming the line for a row
/// with another number of fields or whose index or temperature is not a number.
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

/// Gaudi device files under `dev`: /dev/accel/accel<N> whose driver in `sys_accel` (/sys/class/accel/
/// accel<N>/device/driver) is habanalabs (the kernel's accel subsystem serves other vendors too), and
/// /dev/hl<N> (the driver's own names before it); Neuron device files (/dev/neuron<N>).
int gaudi_device_files(const std::string& dev = "/dev", const std::string& sys_accel = "/sys/class/accel");
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

/// Runs the probes on this node: the facts above with the tool under a time limit of `seconds`.
VendorNode probe_gaudi(double seconds);
VendorNode probe_neuron(double seconds);

}  // namespace pcdino::doctor
