// Versions of the components that profile conditions test, found on the node where the task runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "pcdino/spank/profiles.hpp"

namespace pcdino::spank {

/// What this node runs, detected without running any program: `kernel` (uname), `libfabric` (fi_version()
/// of libfabric.so.1: major.minor), `nccl` (ncclGetVersion() of libnccl.so.2), each only if present.
std::map<std::string, Version> node_versions();

/// node_versions(); then the other components listed in the image manifest `manifest_path`
/// ({"components": {"aws-ofi-nccl": "1.7.4", ...}}, written by `pcdino ami`; entries that name no version
/// skipped) if it exists; then `pinned` (the profile file's `versions:`), which win. Problems (an
/// unreadable manifest) are appended to `notes` for the log, never thrown.
std::map<std::string, Version> detect_versions(const std::string& manifest_path,
                                               const std::map<std::string, Version>& pinned,
                                               std::vector<std::string>* notes);

}  // namespace pcdino::spank
