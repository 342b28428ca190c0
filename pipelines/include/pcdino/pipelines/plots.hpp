// The plots stage (scDINO's UMAP plots, plus the numbers of the run): renders with gnuplot, Debian's
// gnuplot-nox, through its pngcairo and svg terminals. gnuplot rather than MathGL because it is one
// program with a stable script language (no library ABI to link), is what cluster users already have on
// head nodes, and writes both PNG and SVG from the same script.
//
// Writes into {run_dir}/plots/:
//   umap.png/.svg                 2-D UMAP of the CLS features coloured by class, with a legend
//   umap.csv                      its coordinates: x, y, class, path
//   training.png/.svg             training loss, learning rate and teacher momentum per logged iteration
//                                 (metrics.jsonl beside log.txt; per epoch from log.txt without it)
//   diagnostics.png/.svg          teacher entropy and teacher-student KL per logged iteration, and the
//                                 online kNN top-1 per epoch when it ran (metrics.jsonl)
//   knn_accuracy.png/.svg         kNN top-1 and top-5 against k (from kNN/knn.json), if it exists
//   confusion_matrix.png/.svg     of the best k (from kNN/knn.json)
//   index.html                    every plot and the key numbers, readable from disk with no server
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"

namespace pcdino::pipelines {

struct PlotsOptions {
  std::string features_file;        ///< "" = {run_dir}/CLS_features/features.h5
  std::string training_log;         ///< "" = {run_dir}/scDINO_ViTs/{dino_vit_name}/log.txt
  std::string gnuplot = "gnuplot";  ///< the program (PATH is searched)
};

struct PlotsReport {
  std::string directory;             ///< {run_dir}/plots
  std::string index_html;            ///< its index.html
  std::vector<std::string> plots;    ///< the PNG files written
  std::vector<std::string> skipped;  ///< plots left out and why ("training: no log.txt at ...")
  std::size_t points = 0;            ///< embedded feature rows
  double umap_seconds = 0;           ///< kNN graph + layout optimisation
};

/// One gnuplot run of `script` (its text) with the working directory `dir`. Throws Error with
/// kUnavailable if the program cannot be started (naming it and the package), Error kSoftware with
/// gnuplot's own message if the script fails.
void run_gnuplot(const std::string& gnuplot, const std::string& dir, const std::string& script);

/// Runs the stage. The UMAP takes downstream_analyses.umap_eval's n_neighbors, min_dist, spread, metric,
/// epochs and random_state (n_components is 2 for a plot). Throws NoInputError (no features file),
/// DataError naming the features file (no labels, fewer rows than n_neighbors) or a malformed log.txt /
/// knn.json (naming the file and line), ConfigError naming umap_eval.n_components when it is not 2,
/// and as run_gnuplot.
PlotsReport run_plots_stage(const PipelineConfig& config, const PlotsOptions& options);

}  // namespace pcdino::pipelines
