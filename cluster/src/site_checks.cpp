#include "site_checks.hpp"

#include "pcdino/cluster/prometheus.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/slurm_features.hpp"

namespace pcdino::cluster {
namespace site_rows {
namespace {

// The sections of head-node.sh that say where commands.sh uploads it (and compute-node.sh beside it), in the
// order their s3_prefix counts. It is one script, uploaded once: the prefixes given must agree, and the first
// given serves the sections that give none.
struct UploadSection {
  const char* parent;  // the section's parent in the spec ("" at the top)
  const char* name;    // its key under the parent
  const char* path;    // its key path, as messages name it
  bool (*on)(const SiteSpec&);
  std::string& (*prefix)(SiteSpec&);
};
const UploadSection kUploadSections[] = {
    {"", "spank", "spank", [](const SiteSpec& s) { return s.spank.enabled; },
     [](SiteSpec& s) -> std::string& { return s.spank.s3_prefix; }},
    {"monitoring", "prometheus", "monitoring.prometheus",
     [](const SiteSpec& s) { return s.prometheus.enabled; },
     [](SiteSpec& s) -> std::string& { return s.prometheus.s3_prefix; }},
    {"", "node_check", "node_check", [](const SiteSpec& s) { return s.node_check.enabled; },
     [](SiteSpec& s) -> std::string& { return s.node_check.s3_prefix; }},
    {"", "containers", "containers", [](const SiteSpec& s) { return s.containers.enabled; },
     [](SiteSpec& s) -> std::string& { return s.containers.s3_prefix; }},
};

}  // namespace

// Every section on gets the upload prefix: its own, or the first given; one that differs is refused.
void check_upload_prefix(Scope& scope, SiteSpec& s) {
  const UploadSection* first = nullptr;
  for (const auto& section : kUploadSections)
    if (section.on(s) && !section.prefix(s).empty()) {
      first = &section;
      break;
    }
  for (const auto& section : kUploadSections) {
    if (!section.on(s)) continue;
    const YAML::Node at = scope.at(section.parent)[section.name];
    std::string& prefix = section.prefix(s);
    const std::string key = std::string(section.path) + ".s3_prefix";
    if (first == nullptr) {
      scope.fail(at, key,
                 "missing: where commands.sh uploads head-node.sh (s3://bucket/prefix; one of spank, "
                 "monitoring.prometheus, node_check and containers gives it for all)");
    } else if (prefix.empty()) {
      prefix = first->prefix(s);
    } else if (prefix != first->prefix(s)) {
      scope.fail(at["s3_prefix"], key,
                 "'" + prefix + "' is not " + first->path + ".s3_prefix '" + first->prefix(s) +
                     "': head-node.sh is one script, uploaded once");
    }
  }
}

// The slurm.conf keys the node check sets itself (CustomSlurmSettings).
const char* const kNodeCheckKeys[] = {"PrologFlags", "HealthCheckProgram", "HealthCheckInterval",
                                      "HealthCheckNodeState"};

// The checks of node_check against the image and slurm.settings (its s3_prefix: check_upload_prefix).
void check_node_check(Scope& scope, SiteSpec& s) {
  if (!s.node_check.enabled) return;
  const YAML::Node at = scope.at("")["node_check"];
  if (s.custom_ami.empty())
    scope.fail(
        at, "node_check",
        "needs image.custom_ami, the pcdino image (`pcdino ami`) that holds pcdino and the node check's "
        "wrapper");
  for (const auto& line : s.slurm_settings) {
    for (const auto& [key, value] : line) {
      const std::string lower = ascii_lower(key);
      for (const char* own : kNodeCheckKeys)
        if (lower == ascii_lower(own))
          scope.fail(at, "node_check",
                     "slurm.settings sets " + key + ", which the node check sets (" + own +
                         "); leave it out, or turn the node check off (node_check: false)");
      // ParallelCluster's slurm.conf has SchedulerParameters=nohold_on_prolog_fail; a site's replaces it.
      if (lower == "schedulerparameters" && value.find("nohold_on_prolog_fail") == std::string::npos)
        scope.fail(
            at, "node_check",
            "slurm.settings' SchedulerParameters replaces ParallelCluster's nohold_on_prolog_fail: add it, "
            "or a job whose prolog found a sick node is requeued held instead of running elsewhere");
    }
  }
}

// The first release whose official images hold Pyxis off, with its example configuration to turn it on
// (aws-parallelcluster-cookbook v3.11.1, CHANGELOG: "Pyxis is now disabled by default"); 3.11.0 turned it on
// itself, with a fault that failed job submissions (aws/aws-parallelcluster#6459).
constexpr const char* kPyxisExamplesRelease = "3.11.1";

// The checks of containers against the release (its s3_prefix: check_upload_prefix).
void check_containers(Scope& scope, SiteSpec& s) {
  if (!s.containers.enabled) return;
  const YAML::Node at = scope.at("")["containers"];
  if (parallelcluster::compare_versions(s.parallelcluster_version, kPyxisExamplesRelease) < 0)
    scope.fail(
        at, "containers",
        "ParallelCluster " + s.parallelcluster_version + " has no Pyxis example configuration to turn on (" +
            kPyxisExamplesRelease + " and later keep it in /opt/parallelcluster/examples; 3.11.0 turned " +
            "Pyxis on itself, with a fault fixed in 3.11.1): use " + kPyxisExamplesRelease + " or later");
}

// The checks of monitoring.prometheus against the image and spank (after both are read).
void check_prometheus(Scope& scope, SiteSpec& s) {
  if (!s.prometheus.enabled) return;
  const YAML::Node at = scope.at("monitoring")["prometheus"];
  // The head node installs Prometheus from its OS's own package, and the rules from the pcdino image.
  const PrometheusPackage* package = prometheus_package(s.os);
  if (package == nullptr || *package->package == '\0') {
    std::string offered;
    for (const auto& row : prometheus_packages())
      if (*row.package != '\0') offered += (offered.empty() ? "" : ", ") + std::string(row.os);
    scope.fail(at, "monitoring.prometheus",
               "the head node (image.os " + s.os + ") has no Prometheus package to install: " +
                   (package != nullptr ? std::string(package->why) + " (" + package->source + ")"
                                       : "not in pcdino's table") +
                   "; pcdino installs no unpinned binary instead (OSes with a package: " + offered + ")");
  }
  if (s.custom_ami.empty())
    scope.fail(at, "monitoring.prometheus",
               "needs image.custom_ami, the pcdino image (`pcdino ami`) that holds pcdino's alert rules and "
               "the compute nodes' node exporter");
  // Slurm's own metrics: pcdino sets MetricsType for the head node's Prometheus (slurm_metrics()).
  if (!slurm_metrics(s)) return;
  for (const auto& line : s.slurm_settings)
    for (const auto& kv : line)
      if (ascii_lower(kv.first) == "metricstype")
        scope.fail(at, "monitoring.prometheus",
                   "slurm.settings sets " + kv.first +
                       ", which monitoring.prometheus sets (metrics/openmetrics on Slurm " +
                       pcdino::slurm::feature("openmetrics").first_release +
                       "+, for the head node's Prometheus); leave it out");
}

// slurm.settings against the release's Slurm: a line only a later Slurm reads (the feature table's keys)
// would stop slurmctld, or do nothing, on the cluster's.
void check_slurm_release(Scope& scope, SiteSpec& s) {
  const parallelcluster::Release* release = parallelcluster::find_release(s.parallelcluster_version);
  if (release == nullptr || *release->slurm == '\0') return;  // a release of unknown Slurm: not judged
  for (std::size_t i = 0; i < s.slurm_settings.size(); ++i)
    for (const auto& [key, value] : s.slurm_settings[i])
      for (const pcdino::slurm::Feature* f : pcdino::slurm::features_of_setting(key, value))
        if (!pcdino::slurm::has(release->slurm, f->name))
          scope.fail(scope.at("slurm")["settings"][i], "slurm.settings[" + std::to_string(i) + "]",
                     key + "=" + value + " needs Slurm " + f->first_release + " or later (" + f->source +
                         "); ParallelCluster " + s.parallelcluster_version + " has Slurm " + release->slurm);
}

}  // namespace site_rows

std::string head_node_s3_prefix(const SiteSpec& site) {
  for (const auto& section : site_rows::kUploadSections)
    if (section.on(site)) return section.prefix(const_cast<SiteSpec&>(site));  // read, never written
  return "";
}

}  // namespace pcdino::cluster
