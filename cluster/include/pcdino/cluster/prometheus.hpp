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
/// slurmctld's first port on a ParallelCluster head node: slurm.conf's SlurmctldPort=6820-6829
/// (aws-parallelcluster-cookbook v3.11.1, cookbooks/aws-parallelcluster-slurm/templates/default/slurm/
/// slurm.conf.erb; later tags could not be read here). slurmctld 25.11 listens on each port of the range and
/// answers HTTP on each (src/slurmctld/controller.c and http.c of 25.11.7).
inline constexpr int kSlurmctldPort = 6820;

/// One endpoint of slurmctld's metrics (MetricsType=metrics/openmetrics) that the head node's Prometheus
/// scrapes, as a scrape job of its own.
struct SlurmMetricsEndpoint {
  const char* job;   ///< the scrape job's name: "slurm-nodes"
  const char* path;  ///< the HTTP path on slurmctld's port: "/metrics/nodes"
  const char* what;  ///< what its series count
};
/// nodes, jobs, partitions, scheduler (Slurm 25.11.7: src/slurmctld/http.c, doc/html/metrics.shtml); not
/// /metrics/jobs-users-accts, a series per user and account that Slurm's guide warns grows unbounded.
const std::vector<SlurmMetricsEndpoint>& slurm_metrics_endpoints();

/// Whether `site`'s head node gets Slurm's metrics: monitoring.prometheus is on (their only reader; the
/// endpoints have no authentication) and the Slurm of its ParallelCluster release (core/parallelcluster.hpp's
/// table) has slurmctld's own metrics (core/slurm_features.hpp's "openmetrics"; an older slurmctld refuses
/// MetricsType), and slurm.settings set no PrivateData (any turns them off). False
/// for a release whose Slurm the table does not know.
bool slurm_metrics(const SiteSpec& site);

/// The CustomSlurmSettings line that turns them on, MetricsType=metrics/openmetrics (on none of
/// ParallelCluster's deny lists), where slurm_metrics(); else none.
std::vector<SlurmLine> slurm_metrics_settings(const SiteSpec& site);

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
/// kRulesDirectory/*.yml. Where slurm_metrics(), also a scrape job per slurm_metrics_endpoints() row on
/// localhost:kSlurmctldPort.
std::string prometheus_config(const SiteSpec& site);

/// The head-node.sh section that installs Prometheus from the OS's package, lets its user reach the
/// instance metadata (HeadNode.Imds.Secured), writes prometheus.yml and the retention, and (re)starts it.
/// Expects PCDINO_PREFIX, fail and put_text from the script's head. "" when monitoring.prometheus is off.
std::string prometheus_head_node_section(const SiteSpec& site);

}  // namespace pcdino::cluster
