// Prometheus on the head node (a site spec's monitoring.prometheus): the package of the head node's OS,
// and the prometheus.yml that finds the compute nodes through EC2 by ParallelCluster's own tags, scrapes
// their node exporters (the pcdino image's, with pcdino's metric files) and loads pcdino's alert rules.
#pragma once

#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"
#include "pcdino/core/exporters.hpp"

namespace pcdino::cluster {

/// Where the pcdino image holds pcdino's alert and recording rules (the package's share/pcdino under
/// /opt/pcdino, as spank/'s profiles).
inline constexpr const char* kRulesDirectory = "/opt/pcdino/share/pcdino/monitoring/rules";
using exporters::kDcgmExporterPort;
using exporters::kNodeExporterPort;
/// Prometheus's own port on the head node (its default --web.listen-address).
inline constexpr int kPrometheusPort = 9090;

/// What an OS's own repositories offer for the Prometheus server. `package` is "" where pcdino knows of
/// none; `why` then says what was found.
struct PrometheusPackage {
  const char* os;
  const char* package;  ///< "" = none: monitoring.prometheus is refused on this OS
  const char* version;  ///< its upstream version
  const char* why;
  const char* source;
};
const std::vector<PrometheusPackage>& prometheus_packages();
/// The row of `os` (site spec image.os), or nullptr for an OS the table does not know.
const PrometheusPackage* prometheus_package(const std::string& os);

/// The head node's /etc/prometheus/prometheus.yml for `site` ("" when monitoring.prometheus is off):
/// ec2_sd_configs in the site's region filtered on tag:parallelcluster:cluster-name = site.name,
/// tag:parallelcluster:node-type = Compute and running instances, port 9100, the instance label
/// relabelled to the node's private DNS name (queue and instance type as labels), and rule_files
/// kRulesDirectory/*.yml.
std::string prometheus_config(const SiteSpec& site);

/// The head-node.sh section that installs Prometheus from the OS's package, lets its user reach the
/// instance metadata (HeadNode.Imds.Secured), writes prometheus.yml and the retention, and (re)starts it.
/// Expects PCDINO_PREFIX, fail and put_text from the script's head. "" when monitoring.prometheus is off.
std::string prometheus_head_node_section(const SiteSpec& site);

}  // namespace pcdino::cluster
