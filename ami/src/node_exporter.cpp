#include "pcdino/ami/node_exporter.hpp"

namespace pcdino::ami {

const std::vector<NodeExporterPackage>& node_exporter_packages() {
  // Checked 2026-11-26. The image's scripts use the OS's own repositories only (no EPEL, no SPAL), so an
  // OS whose node exporter lives in one of those refuses versions.node_exporter rather than fetch a
  // binary that nothing pins or updates.
  static const std::vector<NodeExporterPackage> table = {
      {"ubuntu2204", "prometheus-node-exporter", "1.3.1", "",
       "packages.ubuntu.com jammy (universe): prometheus-node-exporter 1.3.1-1ubuntu0.22.04.3 in "
       "jammy-updates and jammy-security; its unit runs /usr/bin/prometheus-node-exporter $ARGS from "
       "/etc/default/prometheus-node-exporter, textfile directory "
       "/var/lib/prometheus/node-exporter by default (Debian's packaging, as bookworm's 1.5.0-1)"},
      {"alinux2023", "", "",
       "Amazon Linux 2023's repositories have no node exporter; it is packaged only in the separate SPAL "
       "repository (golang-github-prometheus-node-exporter), which the image does not use",
       "amazonlinux/amazon-linux-2023 issue #462 ('[Package Request] - prometheus-node-exporter', open; "
       "2025-11-25: available in SPAL)"},
      {"alinux2", "", "",
       "Amazon Linux 2's repositories have no node exporter; EPEL 7 has golang-github-prometheus-node-"
       "exporter, and the image does not use EPEL",
       "prometheus/node_exporter issue #2160 (EPEL 7, 8 and 9 package); amazonlinux/amazon-linux-2023 "
       "issue #462 ('Is this package available in Amazon Linux 2?' - no)"},
  };
  return table;
}

const NodeExporterPackage* node_exporter_package(const std::string& os) {
  for (const auto& row : node_exporter_packages())
    if (os == row.os) return &row;
  return nullptr;
}

}  // namespace pcdino::ami
