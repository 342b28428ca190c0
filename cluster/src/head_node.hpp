// head-node.sh, the head node's OnNodeConfigured and OnNodeUpdated action that `pcdino cluster generate`
// writes (ClusterFiles::head_node_script), with its --remove.
#pragma once

#include <string>

#include "pcdino/cluster/site.hpp"
#include "pcdino/core/accelerator.hpp"

namespace pcdino::cluster {

/// head-node.sh for `spec` ("" when no section needs it: has_head_node_script()). What it does and its
/// record for --remove: generate.hpp, ClusterFiles::head_node_script.
std::string head_node_script(const SiteSpec& spec);

/// The accelerator kind of an instance type's devices other than NVIDIA's GPUs (the catalogue's device
/// model in core/accelerator.hpp's table), or nullptr: its name is also its SPANK profile's.
const AcceleratorKind* vendor_accelerator(const std::string& instance_type);

}  // namespace pcdino::cluster
