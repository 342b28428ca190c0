// `pcdino cluster cost`: what a cluster costs per hour while it exists, and what one training run adds,
// from the dated per-region price tables (prices.hpp). A price the tables lack is named, never guessed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"
#include "pcdino/core/config.hpp"

namespace pcdino::cluster {

/// The throughput figure a run estimate needs: images per second per GPU (measured, e.g. from the
/// training log of a short run) and the number of training images per epoch.
struct RunFigures {
  long long train_images = 0;
  double images_per_second_per_gpu = 0;
};

/// One line of the estimate: a thing the cluster pays for by the hour, or a price the tables lack.
struct CostLine {
  std::string what;    ///< "head node", "queue gpu static nodes", "NAT gateway", ...
  std::string detail;  ///< "1 x c5.4xlarge", "4800 GiB PERSISTENT_1 at 200 MB/s/TiB", ...
  /// USD per hour; nullopt: not priced, and `missing` says why: "no price in the table for X in REGION", or
  /// "size unknown: KEY unset (the AMI's size)" for a root volume the site spec does not size.
  std::optional<double> usd_per_hour;
  std::string missing;
};

/// What the cluster costs while it exists: the head node, each queue's static nodes (MinCount) with their
/// root volumes, FSx for Lustre, the /apps volume and the generated network's NAT gateway and public IPv4
/// addresses, in the site's region.
struct ClusterCost {
  std::vector<CostLine> lines;
  double usd_per_hour = 0;            ///< sum of the priced lines
  std::vector<std::string> missing;   ///< each unpriced line's `missing`, in line order
  std::vector<std::string> excluded;  ///< billed otherwise (prepaid, per GB, a reservation), said in words
  std::vector<std::string> sources;   ///< PriceSource ids of the priced lines, first use first
};

/// One training run on its queue (the pipeline's slurm.partition, else the first queue): hours =
/// epochs x images / (images/s per GPU x nodes x GPUs per node) / 3600. The queue's static nodes are
/// already in the always-on total: only the nodes the run needs beyond them are added.
struct RunCost {
  std::string problem;  ///< non-empty: no estimate, and why (the partition names no queue, too many nodes)
  std::string queue, instance_type;
  int nodes = 0, gpus = 0;
  double hours = 0;
  bool capacity_block = false;       ///< the queue is a capacity block: its nodes are prepaid, not hourly
  int extra_nodes = 0;               ///< nodes beyond the queue's MinCount
  double extra_usd_per_hour = 0;     ///< the priced part of the extra nodes (instances, root volumes)
  std::string extra_missing;         ///< the unpriced part, named ("" if none)
  double usd = 0;                    ///< hours x (always-on + extra_usd_per_hour)
  std::vector<std::string> sources;  ///< PriceSource ids of the extra nodes' prices
};

/// The always-on estimate of `site` (prices of site.region).
ClusterCost cluster_cost(const SiteSpec& site);

/// The run estimate of `pipeline` with `figures` (both > 0) on `site`, adding to `always_on`.
RunCost run_cost(const SiteSpec& site, const ClusterCost& always_on, const PipelineConfig& pipeline,
                 const RunFigures& figures);

/// The readable report: the always-on lines and total (naming what it lacks and what is billed otherwise),
/// with a pipeline and figures the run estimate, then the sources of the prices used.
std::string cost_report(const SiteSpec& site, const PipelineConfig* pipeline, const RunFigures& figures);

}  // namespace pcdino::cluster
