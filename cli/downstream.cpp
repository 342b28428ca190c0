// pcdino labels and pcdino knn: the downstream stages that need no model (single process each; the kNN
// search runs on faiss's OpenMP threads).
#include <spdlog/spdlog.h>

#include <memory>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/pipelines/knn.hpp"
#include "pcdino/pipelines/labels.hpp"
#include "pcdino/pipelines/plots.hpp"

namespace pcdino::cli {

namespace {
struct PlotsArgs {
  app::ConfigOptions config;
  pipelines::PlotsOptions plots;
};
struct KnnArgs {
  app::ConfigOptions config;
  pipelines::KnnOptions search;
  std::string features;
};
}  // namespace

void add_downstream_commands(CLI::App& app) {
  auto labels = std::make_shared<app::ConfigOptions>();
  CLI::App* l = app.add_subcommand(
      "labels",
      "Class labels and paths of the held-out split: CLS_features/class_labels.csv, image_paths.csv");
  app::add_config_options(l, *labels);
  l->callback([labels] {
    const PipelineConfig config = labels->load();
    const pipelines::LabelsReport r = pipelines::run_labels_stage(config);
    spdlog::info("labels and paths of {} held-out images written to {}", r.images, r.directory);
  });

  auto knn = std::make_shared<KnnArgs>();
  CLI::App* k = app.add_subcommand(
      "knn", "Weighted kNN accuracy of the CLS features (DINO's eval_knn): kNN/global_kNN.txt, kNN/knn.json");
  app::add_config_options(k, knn->config);
  k->add_option("--features", knn->features, "Features file (default {run_dir}/CLS_features/features.h5)");
  k->add_option("--ivf-lists", knn->search.ivf_lists,
                "Approximate search with a faiss IVF index of this many lists (0: exact search)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  k->add_option("--ivf-probes", knn->search.ivf_probes, "Lists visited per query with --ivf-lists")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  k->add_option("--threads", knn->search.threads, "Search threads (0: all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  k->callback([knn] {
    const PipelineConfig config = knn->config.load();
    if (knn->search.threads == 0) knn->search.threads = app::default_threads(0, 1);
    const pipelines::KnnReport r = pipelines::run_knn_stage(config, knn->search, knn->features);
    for (const auto& s : r.result.scores) {
      spdlog::info("{:>4}-NN (T = {}): top-1 {:.2f}%  top-2 {:.2f}%  top-5 {:.2f}%", s.k, s.temperature,
                   s.top1, s.top2, s.top5);
    }
    spdlog::info(
        "{} queries against a bank of {} in {:.2f} s ({:.0f} queries/s over all k); best k = {}; wrote {} "
        "and {}",
        r.queries, r.bank, r.seconds, r.queries_per_second, r.best_k, r.text_file, r.json_file);
  });

  auto plots = std::make_shared<PlotsArgs>();
  CLI::App* p = app.add_subcommand(
      "plots",
      "UMAP of the CLS features, training curves, kNN accuracy and confusion matrix (gnuplot; PNG and SVG) "
      "and plots/index.html");
  app::add_config_options(p, plots->config);
  p->add_option("--features", plots->plots.features_file,
                "Features file (default {run_dir}/CLS_features/features.h5)");
  p->add_option("--training-log", plots->plots.training_log,
                "Training log (default {run_dir}/scDINO_ViTs/{dino_vit_name}/log.txt)");
  p->add_option("--gnuplot", plots->plots.gnuplot, "The gnuplot program")->capture_default_str();
  p->callback([plots] {
    const PipelineConfig config = plots->config.load();
    const pipelines::PlotsReport r = pipelines::run_plots_stage(config, plots->plots);
    for (const auto& s : r.skipped) spdlog::warn("not drawn: {}", s);
    spdlog::info("UMAP of {} points in {:.1f} s; {} plots in {}; open {}", r.points, r.umap_seconds,
                 r.plots.size(), r.directory, r.index_html);
  });
}

}  // namespace pcdino::cli
