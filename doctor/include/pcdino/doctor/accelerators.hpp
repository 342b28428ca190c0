// The doctor's probes of accelerators other than NVIDIA's: each kind is a row of vendor_probes(), defined in
// the kind's own file (its kernel module, device files and the vendor's tool, judged against the node's
// instance type, ami/accelerators.hpp, and the image manifest). On a node without the kind its check says
// "not present", which is healthy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/doctor/doctor.hpp"

namespace pcdino::doctor {

/// What a node shows of one vendor's stack.
struct VendorNode {
  int device_files = 0;        ///< the kind's device files under /dev
  bool module_loaded = false;  ///< its kernel module in /proc/modules
  bool tool_found = false;     ///< the vendor's tool could be started
  int tool_exit = 0;           ///< its exit status
  std::string tool_output;     ///< its stdout
  std::string tool_error;      ///< its stderr, or why it did not run
};

/// The detail of a kind's check on a node that has none of it (ok).
inline constexpr const char* kNotPresent = "not present";

/// One accelerator kind besides NVIDIA's: how the doctor finds and judges it on a node, and what stands in
/// for NCCL's sweep there.
struct VendorProbe {
  const char* check;  ///< the check's name, a column of the table
  /// What a node with the kind has and its vendor's collectives test: NCCL's sweep does not run there, and
  /// its note says "<node> " + this.
  const char* instead_of_nccl;
  /// The facts of this node, the vendor's tool run under a time limit of `seconds`.
  VendorNode (*probe)(double seconds);
  /// The check from those facts, against the node's EC2 `instance_type` ("" if unknown) and the image
  /// manifest at `manifest` ("" or absent: not compared); kNotPresent (ok) on a node without the kind.
  Check (*judge)(const VendorNode& node, const std::string& instance_type, const std::string& manifest);
  /// The vendor's collectives test on a node whose check found the devices healthy, under `seconds`;
  /// nullopt when it cannot run there (an optional tool). nullptr: the doctor runs none for the kind.
  std::optional<Check> (*collectives)(const VendorNode& node, double seconds);
};

/// The kinds, in the order their checks are made: those doctor/CMakeLists.txt lists, each the row of
/// `<kind>_probe()` in src/<kind>.cpp (the list's source is generated from it).
const std::vector<VendorProbe>& vendor_probes();

/// Whether `module` is listed in `proc_modules` (/proc/modules' format: the name first on each line).
bool module_loaded(const std::string& module, const std::string& proc_modules = "/proc/modules");

}  // namespace pcdino::doctor
