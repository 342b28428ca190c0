// The Prometheus node exporter on the image: installed from the OS's own packages (never an unpinned
// download), with its textfile collector on the directory where pcdino's stages write their metrics
// (`pcdino_<slurm_job_id>_<rank>.prom`), as a service that starts at boot.
#pragma once

#include <string>
#include <vector>

#include "pcdino/core/exporters.hpp"

namespace pcdino::ami {

using exporters::kNodeExporterPort;
using exporters::kTextfileDirectory;

/// What an OS's own repositories offer for the node exporter. `package` is "" where they have none; `why`
/// then says so and where it is found instead (a repository the image does not use).
struct NodeExporterPackage {
  const char* os;
  const char* package;  ///< the package to install ("" = none in the OS's repositories)
  const char* version;  ///< its upstream version, what versions.node_exporter must say ("1.3.1")
  const char* why;      ///< for an OS without a package: what is missing, and where it exists
  const char* source;   ///< where the row comes from (package index, issue), with the release
};

/// Every OS the image specs support (spec.hpp: alinux2, alinux2023, ubuntu2204).
const std::vector<NodeExporterPackage>& node_exporter_packages();

/// The row of `os`, or nullptr for an OS the table does not know.
const NodeExporterPackage* node_exporter_package(const std::string& os);

}  // namespace pcdino::ami
