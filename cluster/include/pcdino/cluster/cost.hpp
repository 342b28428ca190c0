// `pcdino cluster cost`: what a cluster and one pipeline run cost, from the dated price table.
#pragma once

#include <string>

#include "pcdino/cluster/site.hpp"
#include "pcdino/core/config.hpp"

namespace pcdino::cluster {

/// The throughput figure a run estimate needs: images per second per GPU (measured, e.g. from the
/// training log of a short run) and the number of training images.
struct RunFigures {
  long long train_images = 0;
  double images_per_second_per_gpu = 0;
};

/// A readable report: hourly cost of the head node, the static nodes (MinCount) and FSx; with a pipeline
/// and figures, the training hours (epochs x images / (images/s per GPU x GPUs)) and their cost on the
/// first queue. Unknown prices are named, never guessed.
std::string cost_report(const SiteSpec& site, const PipelineConfig* pipeline, const RunFigures& figures);

}  // namespace pcdino::cluster
