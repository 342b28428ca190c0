// The doctor's probe of Intel Gaudi nodes (Habana Labs' cards): the habanalabs kernel module, the device
// files and hl-smi, judged against the node's instance type (ami/accelerators.hpp) and the image manifest's
// Gaudi release; the row habana_probe() of vendor_probes().
#pragma once

#include <string>
#include <vector>

#include "pcdino/doctor/accelerators.hpp"

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

/// Gaudi device files under `dev`: /dev/accel/accel<N> whose driver in `sys_accel` (/sys/class/accel/
/// accel<N>/device/driver) is habanalabs (the kernel's accel subsystem serves other vendors too), and
/// /dev/hl<N> (the driver's own names before it).
int gaudi_device_files(const std::string& dev = "/dev", const std::string& sys_accel = "/sys/class/accel");

/// The check "gaudi": "not present" (ok) when the node has no Gaudi device, module or hl-smi and its
/// instance type (`instance_type`, "" if unknown) carries none; otherwise fails, naming what is wrong: the
/// habanalabs module not loaded, hl-smi missing or failing, fewer cards than the instance type has, a card
/// at 0 C (Intel: initialisation failed) or at kGaudiHotC or more, a driver other than the manifest's
/// `gaudi_software` release (X.Y.Z; "" = not compared).
Check judge_gaudi(const VendorNode& node, const std::string& instance_type,
                  const std::string& gaudi_software);

/// pcdino's limit for a card's temperature: an idle card this hot is not cooled.
inline constexpr double kGaudiHotC = 95;

/// Runs the probe on this node: the facts above with hl-smi under a time limit of `seconds`.
VendorNode probe_gaudi(double seconds);

/// The row of vendor_probes(): the check "gaudi" (judge_gaudi() against the manifest's `gaudi_software`
/// component); NCCL's sweep does not run on a node with cards (HCCL's test is hccl_demo, not run).
VendorProbe habana_probe();

}  // namespace pcdino::doctor
