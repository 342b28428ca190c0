// The Prometheus exporters of a pcdino compute node, named once: the image installs them (ami/), the head
// node's Prometheus scrapes them (cluster/), verify.sh and the doctor ask them. pcdino's own metrics reach
// Prometheus through the node exporter's textfile collector; the GPUs' through NVIDIA's dcgm-exporter.
#pragma once

#include <vector>

namespace pcdino::exporters {

/// The node exporter's port (its default `--web.listen-address`, :9100).
inline constexpr int kNodeExporterPort = 9100;
/// The textfile collector's directory: Debian's and Ubuntu's default `--collector.textfile.directory`
/// (their prometheus-node-exporter package), and the default of pcdino's metrics directory.
inline constexpr const char* kTextfileDirectory = "/var/lib/prometheus/node-exporter";

/// dcgm-exporter's port (pkg/cmd/app.go: `--address` default ":9400").
inline constexpr int kDcgmExporterPort = 9400;
/// The release whose default counters monitoring/upstream/dcgm-exporter-counters.yaml restates
/// (github.com/NVIDIA/dcgm-exporter tag 4.5.3-4.8.2), and its package in NVIDIA's CUDA repository for
/// Ubuntu (datacenter-gpu-manager-exporter, versioned by the exporter: 4.8.2-1).
inline constexpr const char* kDcgmExporterRelease = "4.5.3-4.8.2";
inline constexpr const char* kDcgmExporterPackage = "datacenter-gpu-manager-exporter";
/// Where the package puts the counters file the service reads (`-f`, the Makefile's install target).
inline constexpr const char* kDcgmCountersFile = "/etc/dcgm-exporter/default-counters.csv";

/// The DCGM fields the dashboard's GPU panels and the GPU alert read (utilisation, framebuffer used and
/// free, power, the last XID error): each enabled in the default counters (tests/monitoring checks it), and
/// the image checks its counters file lists them.
inline const std::vector<const char*>& dcgm_fields_used() {
  static const std::vector<const char*> fields = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                                                  "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
                                                  "DCGM_FI_DEV_XID_ERRORS"};
  return fields;
}

}  // namespace pcdino::exporters
