#include "pcdino/pipelines/plots.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/pipelines/features.hpp"
#include "pcdino/pipelines/umap.hpp"

extern char** environ;

namespace pcdino::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A gnuplot single-quoted string: no escapes but '' for a quote.
std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string html_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Matplotlib's tab10 for up to ten classes (what scDINO's seaborn plots use), evenly spaced hues beyond.
std::string class_colour(std::size_t c, std::size_t classes) {
  static const char* tab10[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  if (classes <= 10) return tab10[c];
  const double h = 6.0 * static_cast<double>(c) / static_cast<double>(classes);
  const double x = 1 - std::fabs(std::fmod(h, 2.0) - 1);
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0:
      r = 1, g = x;
      break;
    case 1:
      r = x, g = 1;
      break;
    case 2:
      g = 1, b = x;
      break;
    case 3:
      g = x, b = 1;
      break;
    case 4:
      r = x, b = 1;
      break;
    default:
      r = 1, b = x;
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(r * 200), static_cast<int>(g * 200),
                static_cast<int>(b * 200));
  return buf;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

struct Renderer {
  std::string gnuplot, dir;
  PlotsReport* report;

  // Renders `body` (gnuplot commands ending in a plot) to NAME.png and NAME.svg, each under a
  // temporary name first.
  void operator()(const std::string& name, const std::string& body, int width = 900, int height = 700) const {
    const std::string png = (fs::path(dir) / (name + ".png")).string();
    const std::string svg = (fs::path(dir) / (name + ".svg")).string();
    const std::string png_part = temporary_name(png), svg_part = temporary_name(svg);
    const std::string size = std::to_string(width) + "," + std::to_string(height);
    std::string script = "set terminal pngcairo size " + size + " noenhanced font 'sans,11'\n";
    script += "set output " + gp_string(png_part) + "\n" + body + "\n";
    script += "set terminal svg size " + size + " noenhanced font 'sans,11' background '#ffffff'\n";
    script += "set output " + gp_string(svg_part) + "\nreplot\nunset output\n";
    run_gnuplot(gnuplot, dir, script);
    rename_into_place(png_part, png);
    rename_into_place(svg_part, svg);
    report->plots.push_back(png);
  }
  // Writes NAME (a data file the scripts read) beside the plots.
  void write_data(const std::string& name, const std::string& text) const {
    write_file_atomic((fs::path(dir) / name).string(), text);
  }
};

// The trainer's metrics.jsonl as the plots use it: the iteration records, and the online kNN's top-1 at
// the last iteration before each "start" or "epoch" record that carries one.
struct KnnPoint {
  long iteration;
  double top1;
};
struct TrainingMetrics {
  std::vector<MetricsRecord> iterations;
  std::vector<KnnPoint> online_knn;
};

TrainingMetrics plotted_metrics(const std::vector<MetricsRecord>& records) {
  TrainingMetrics m;
  for (const auto& r : records) {
    if (r.kind == MetricsRecord::Kind::kIteration) {
      m.iterations.push_back(r);
    } else if (r.online_knn_top1) {
      m.online_knn.push_back({m.iterations.empty() ? 0 : m.iterations.back().iteration, *r.online_knn_top1});
    }
  }
  return m;
}

// The features the UMAP embeds: labelled, and at least n_neighbors rows.
FeatureSet read_plotted_features(const std::string& features_file, const DownstreamConfig::Umap& u) {
  FeatureSet set = read_features(features_file);
  if (set.labels.size() != set.rows)
    throw DataError(features_file + ": no labels for the " + std::to_string(set.rows) + " rows");
  if (set.rows < static_cast<std::size_t>(u.n_neighbors)) {
    throw DataError(features_file + " has " + std::to_string(set.rows) +
                    " rows, fewer than downstream_analyses.umap_eval.n_neighbors (" +
                    std::to_string(u.n_neighbors) + ")");
  }
  return set;
}

// The features' 2-D UMAP embedding, [rows, 2]; the report gets the points and the seconds it took.
std::vector<float> umap_layout(const FeatureSet& set, const DownstreamConfig::Umap& u, PlotsReport& report) {
  UmapOptions uo;
  uo.n_neighbors = u.n_neighbors, uo.min_dist = u.min_dist, uo.spread = u.spread, uo.metric = u.metric;
  uo.epochs = u.epochs, uo.random_state = static_cast<std::uint64_t>(u.random_state);
  const auto start = std::chrono::steady_clock::now();
  std::vector<float> xy = umap_embed(set.features, set.rows, set.dim, uo);
  report.umap_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.points = set.rows;
  return xy;
}

// What embedded the features: "vit_small teacher, epoch 100", "randomly initialised vit_small", "raw pixels".
std::string model_description(const FeatureSet& set) {
  return set.checkpoint_key == "random" ? "randomly initialised " + set.arch
         : set.checkpoint_key == "raw_pixels"
             ? std::string("raw pixels")
             : set.arch + " " + set.checkpoint_key +
                   (set.epoch >= 0 ? ", epoch " + std::to_string(set.epoch) : "");
}

// umap.csv (every point with its class and path), umap.dat (a data block per class) and the UMAP plot.
void draw_umap(const PipelineConfig& config, const FeatureSet& set, const std::vector<float>& xy,
               const std::string& model, const Renderer& render) {
  const std::size_t classes = set.class_names.size();
  std::string csv = "x,y,class,path\n", dat;
  std::vector<std::size_t> count(classes, 0);
  for (std::size_t i = 0; i < set.rows; ++i) {
    csv += fixed(xy[2 * i], 5) + "," + fixed(xy[2 * i + 1], 5) + "," + set.class_names[set.labels[i]] + "," +
           set.paths[i] + "\n";
    ++count[static_cast<std::size_t>(set.labels[i])];
  }
  std::string plot = "plot ";
  int block = 0;
  for (std::size_t c = 0; c < classes; ++c) {
    if (count[c] == 0) continue;
    for (std::size_t i = 0; i < set.rows; ++i) {
      if (static_cast<std::size_t>(set.labels[i]) == c)
        dat += fixed(xy[2 * i], 4) + " " + fixed(xy[2 * i + 1], 4) + "\n";
    }
    dat += "\n\n";  // a new data block (gnuplot's "index")
    plot += std::string(block > 0 ? ", \\\n     " : "") + "'umap.dat' index " + std::to_string(block) +
            " with points pt 7 ps 0.35 lc rgb '" + class_colour(c, classes) +
            "' notitle, \\\n     NaN with points pt 7 ps 1.6 lc rgb '" + class_colour(c, classes) +
            "' title " +
            gp_string(set.class_names[c] + " (" + std::to_string(count[c]) + ")");  // a legible legend marker
    ++block;
  }
  render.write_data("umap.csv", csv);
  render.write_data("umap.dat", dat);
  render("umap",
         "cd " + gp_string(render.dir) + "\nset title " +
             gp_string("UMAP of the CLS features: " + config.meta.name_of_run + " (" + model + ", " +
                       std::to_string(set.rows) + " held-out images)") +
             "\nset xlabel 'UMAP 1'\nset ylabel 'UMAP 2'\nset key outside right top box\n" + "set grid\n" +
             plot,
         1100, 800);
}

// The title of the training plot, per iteration or per epoch.
std::string training_title(const PipelineConfig& config) {
  return gp_string("DINO training: " + config.meta.name_of_run);
}

// Loss, learning rate and teacher momentum per logged iteration (training.dat, from metrics.jsonl).
void draw_iteration_curves(const PipelineConfig& config, const TrainingMetrics& metrics,
                           const Renderer& render) {
  std::string rows;
  for (const auto& r : metrics.iterations) {
    rows += std::to_string(r.iteration) + " " + fixed(r.loss, 6) + " " + fmt::format("{:.6e}", r.lr) + " " +
            fixed(r.momentum, 6) + " " + fixed(r.teacher_entropy, 6) + " " + fixed(r.kl, 6) + "\n";
  }
  render.write_data("training.dat", rows);
  render("training",
         "cd " + gp_string(render.dir) + "\nset multiplot layout 2,1 title " + training_title(config) +
             "\nset grid\nset key top right\nset xlabel 'iteration'\n"
             "set ylabel 'train loss'\n"
             "plot 'training.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'train loss (mean of 10 "
             "iterations)'\n"
             "set ylabel 'learning rate'\nset y2label 'teacher momentum'\nset ytics nomirror\nset y2tics\n"
             "set format y '%.1e'\n"
             "plot 'training.dat' using 1:3 with lines lw 2 lc rgb '#ff7f0e' title 'learning rate' axes "
             "x1y1, \\\n"
             "     'training.dat' using 1:4 with lines lw 2 dt 2 lc rgb '#2ca02c' title 'teacher momentum' "
             "axes x1y2\nunset multiplot",
         900, 800);
}

// The collapse check (DINO paper, sec. 5.3): the teacher's entropy and the teacher-student KL per logged
// iteration (training.dat's columns 5 and 6), and the online kNN's top-1 when it ran (online_knn.dat).
void draw_diagnostics(const PipelineConfig& config, const TrainingMetrics& metrics, const Renderer& render) {
  const double uniform = std::log(static_cast<double>(config.train.hyperparameters.out_dim));
  std::string knn_rows;
  for (const auto& k : metrics.online_knn)
    knn_rows += std::to_string(k.iteration) + " " + fixed(k.top1, 4) + "\n";
  std::string body =
      "cd " + gp_string(render.dir) + "\nset multiplot layout " + (knn_rows.empty() ? "2" : "3") +
      ",1 title " + gp_string("Collapse check (DINO paper, sec. 5.3): " + config.meta.name_of_run) +
      "\nset grid\nset key top right\nset xlabel 'iteration'\n"
      "set ylabel 'nats'\n"
      "plot 'training.dat' using 1:5 with lines lw 2 lc rgb '#9467bd' title 'teacher entropy h(P_t)', "
      "\\\n     " +
      fixed(uniform, 4) +
      " with lines dt 2 lc rgb '#7f7f7f' title 'ln(out_dim): uniform collapse', \\\n"
      "     0 with lines dt 3 lc rgb '#d62728' title '0: one-hot collapse'\n"
      "set ylabel 'nats'\n"
      "plot 'training.dat' using 1:6 with lines lw 2 lc rgb '#8c564b' title 'KL(P_t || P_s): 0 when "
      "collapsed'\n";
  if (!knn_rows.empty()) {
    render.write_data("online_knn.dat", knn_rows);
    body +=
        "set ylabel 'top-1 %'\nplot 'online_knn.dat' using 1:2 with linespoints pt 7 lw 2 lc rgb "
        "'#17becf' title 'online kNN top-1 (held-out subset)'\n";
  }
  render("diagnostics", body + "unset multiplot", 900, knn_rows.empty() ? 800 : 1100);
}

// Loss and learning rate per epoch (training.dat, from log.txt), for runs without metrics.jsonl.
void draw_epoch_curves(const PipelineConfig& config, const std::vector<TrainingLogLine>& epochs,
                       const Renderer& render) {
  std::string rows;
  for (const auto& r : epochs)
    rows += std::to_string(r.epoch) + " " + fixed(r.loss, 6) + " " + std::to_string(r.lr) + "\n";
  render.write_data("training.dat", rows);
  render("training",
         "cd " + gp_string(render.dir) + "\nset title " + training_title(config) + "\nset xlabel 'epoch'\n" +
             std::string(epochs.size() <= 30 ? "set xtics 1\n" : "") +
             "set ylabel 'train loss'\nset y2label 'learning rate'\n"
             "set ytics nomirror\nset y2tics\nset format y2 '%.1e'\nset grid\nset key top right\n"
             "plot 'training.dat' using 1:2 with linespoints pt 7 lw 2 lc rgb '#1f77b4' title 'train loss' "
             "axes x1y1, \\\n"
             "     'training.dat' using 1:3 with lines lw 2 dt 2 lc rgb '#ff7f0e' title 'learning rate' "
             "axes x1y2");
}

// Training curves: per logged iteration from metrics.jsonl (with the collapse check), else per epoch from
// log.txt. Returns log.txt's epochs (none when it is missing) for the index's summary.
std::vector<TrainingLogLine> draw_training(const PipelineConfig& config, const std::string& log_file,
                                           const Renderer& render, PlotsReport& report) {
  std::vector<TrainingLogLine> epochs;
  if (fs::exists(log_file)) epochs = read_training_log(log_file);
  const std::string metrics_file = ModelFiles{fs::path(log_file).parent_path().string()}.metrics();
  TrainingMetrics metrics;
  if (fs::exists(metrics_file)) metrics = plotted_metrics(read_metrics(metrics_file));
  if (!metrics.iterations.empty()) {
    draw_iteration_curves(config, metrics, render);
    draw_diagnostics(config, metrics, render);
  } else if (!epochs.empty()) {
    draw_epoch_curves(config, epochs, render);
  }
  if (metrics.iterations.empty() && epochs.empty()) {
    report.skipped.push_back("training curves: no epochs in " + log_file + " and no iterations in " +
                             metrics_file);
  } else if (metrics.iterations.empty()) {
    report.skipped.push_back("collapse diagnostics: no iteration records in " + metrics_file);
  }
  return epochs;
}

// Top-1 and top-5 against k (knn.dat).
void draw_knn_accuracy(const json& knn, const Renderer& render) {
  std::string rows;
  for (const auto& r : knn.at("results")) {
    rows += std::to_string(r.at("k").get<int>()) + " " + fixed(r.at("top1").get<double>(), 4) + " " +
            fixed(r.at("top5").get<double>(), 4) + "\n";
  }
  render.write_data("knn.dat", rows);
  render("knn_accuracy", "cd " + gp_string(render.dir) + "\nset title " +
                             gp_string("Weighted kNN on the CLS features (T = " +
                                       fixed(knn.at("temperature").get<double>(), 2) + ")") +
                             "\nset xlabel 'k (neighbours)'\nset ylabel 'accuracy (%)'\nset logscale x\n"
                             "set grid\nset key bottom right\nset yrange [0:100]\n"
                             "plot 'knn.dat' using 1:2 with linespoints pt 7 lw 2 title 'top-1', \\\n"
                             "     'knn.dat' using 1:3 with linespoints pt 5 lw 2 title 'top-5'");
}

// The best k's confusion matrix as an image (confusion.dat) with its counts written on it
// (confusion_labels.dat).
void draw_confusion_matrix(const json& knn, const Renderer& render) {
  const auto& counts = knn.at("confusion_matrix").at("counts");
  const auto names = knn.at("class_names").get<std::vector<std::string>>();
  std::string matrix, labels, tics;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    for (std::size_t c = 0; c < counts[r].size(); ++c) {
      matrix += (c ? " " : "") + std::to_string(counts[r][c].get<long>());
      labels +=
          std::to_string(c) + " " + std::to_string(r) + " " + std::to_string(counts[r][c].get<long>()) + "\n";
    }
    matrix += "\n";
  }
  for (std::size_t c = 0; c < names.size(); ++c)
    tics += std::string(c ? ", " : "") + gp_string(names[c]) + " " + std::to_string(c);
  render.write_data("confusion.dat", matrix);
  render.write_data("confusion_labels.dat", labels);
  const auto n = static_cast<double>(names.size());
  render("confusion_matrix",
         "cd " + gp_string(render.dir) + "\nset title " +
             gp_string("Confusion matrix of the " + std::to_string(knn.at("best_k").get<int>()) +
                       "-NN classifier (" + std::to_string(knn.at("queries").get<long>()) + " queries)") +
             "\nset xlabel 'predicted class'\nset ylabel 'true class'\nset xtics (" + tics +
             ") rotate by 45 right\n"
             "set ytics (" +
             tics + ")\nset xrange [-0.5:" + fixed(n - 0.5, 1) + "]\nset yrange [" + fixed(n - 0.5, 1) +
             ":-0.5]\nset palette defined (0 '#ffffff', 1 '#08306b')\nset cblabel 'images'\nunset key\n"
             "plot 'confusion.dat' matrix with image, \\\n"
             "     'confusion_labels.dat' using 1:2:(sprintf('%d', $3)) with labels font 'sans,9'",
         950, 850);
}

// The kNN stage's plots. Returns knn.json, null when the stage has not run.
json draw_knn(const std::string& knn_file, const Renderer& render, PlotsReport& report) {
  json knn;
  if (!fs::exists(knn_file)) {
    report.skipped.push_back("kNN plots: no " + knn_file + " (run pcdino knn first)");
    return knn;
  }
  try {
    knn = json::parse(read_file(knn_file, "kNN results"));
    draw_knn_accuracy(knn, render);
    draw_confusion_matrix(knn, render);
  } catch (const json::exception& e) {
    throw DataError(knn_file + ": not the kNN stage's knn.json (" + e.what() + ")");
  }
  return knn;
}

// The plots in the order index.html shows them, with their captions.
constexpr std::pair<const char*, const char*> kFigures[] = {
    {"umap", "UMAP of the held-out images' CLS features, coloured by class."},
    {"training",
     "Training loss, learning rate and teacher momentum per logged iteration (metrics.jsonl; "
     "per epoch from log.txt for runs without it)."},
    {"diagnostics",
     "The collapse check: the teacher's output entropy and the teacher-student KL per logged "
     "iteration, and the online kNN top-1 when it ran. Uniform collapse: entropy at "
     "ln(out_dim), KL 0; one-hot collapse: entropy 0, KL 0; learning: KL above 0."},
    {"knn_accuracy", "Weighted kNN accuracy against k."},
    {"confusion_matrix", "Confusion matrix of the best k: rows are true classes, columns predictions."}};

// What index.html shows besides the plots: where the features came from and the key numbers.
struct IndexSummary {
  const std::string& features_file;
  const std::string& model;
  const FeatureSet& set;
  const std::vector<TrainingLogLine>& epochs;  // log.txt's
  const json& knn;                             // knn.json, null when the kNN stage has not run
};

// index.html: the summary table, every plot drawn and what was not drawn.
std::string index_html(const PipelineConfig& config, const IndexSummary& in, const PlotsReport& report) {
  const auto& u = config.downstream.umap_eval;
  const FeatureSet& set = in.set;
  const auto& epochs = in.epochs;
  const json& knn = in.knn;
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pcdino: "
       << html_escaped(config.meta.name_of_run)
       << "</title>\n<style>body{font-family:sans-serif;max-width:1150px;margin:2em auto;color:#222}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 10px;text-align:left}"
          "img{max-width:100%;border:1px solid #ddd}figure{margin:2em 0}</style></head><body>\n"
       << "<h1>pcdino run " << html_escaped(config.meta.name_of_run) << "</h1>\n<table>\n";
  const auto row = [&html](const std::string& k, const std::string& v) {
    html << "<tr><th>" << html_escaped(k) << "</th><td>" << html_escaped(v) << "</td></tr>\n";
  };
  row("features", in.features_file + " (" + std::to_string(set.rows) + " x " + std::to_string(set.dim) + ")");
  row("model", in.model + (set.checkpoint.empty() ? "" : " from " + set.checkpoint));
  if (!epochs.empty()) {
    row("training", std::to_string(epochs.size()) + " epochs logged; loss " + fixed(epochs.front().loss, 4) +
                        " (epoch " + std::to_string(epochs.front().epoch) + ") to " +
                        fixed(epochs.back().loss, 4) + " (epoch " + std::to_string(epochs.back().epoch) +
                        ")");
  }
  if (!knn.is_null()) {
    for (const auto& r : knn.at("results")) {
      if (r.at("k").get<int>() == knn.at("best_k").get<int>()) {
        row("kNN (best k)", std::to_string(r.at("k").get<int>()) + "-NN: top-1 " +
                                fixed(r.at("top1").get<double>(), 2) + "%, top-5 " +
                                fixed(r.at("top5").get<double>(), 2) + "% (bank " +
                                std::to_string(knn.at("bank").get<long>()) + ", queries " +
                                std::to_string(knn.at("queries").get<long>()) + ") from " +
                                knn.at("features_file").get<std::string>());
      }
    }
  }
  row("UMAP", "n_neighbors " + std::to_string(u.n_neighbors) + ", min_dist " + fixed(u.min_dist, 2) +
                  ", spread " + fixed(u.spread, 2) + ", metric " + u.metric + ", epochs " +
                  std::to_string(u.epochs) + ", random_state " + std::to_string(u.random_state));
  html << "</table>\n";
  for (const auto& [name, caption] : kFigures) {
    if (!fs::exists(fs::path(report.directory) / (std::string(name) + ".png"))) continue;
    html << "<figure><img src=\"" << name << ".png\" alt=\"" << caption << "\"><figcaption>" << caption
         << " <a href=\"" << name << ".svg\">SVG</a></figcaption></figure>\n";
  }
  for (const auto& s : report.skipped) html << "<p>Not drawn: " << html_escaped(s) << "</p>\n";
  html << "</body></html>\n";
  return html.str();
}

}  // namespace

void run_gnuplot(const std::string& gnuplot, const std::string& dir, const std::string& script) {
  const std::string script_file = (fs::path(dir) / ".plot.gp").string();
  write_file_atomic(script_file, script);
  const ProcessResult r =
      run_process({gnuplot, script_file}, "the plots stage needs gnuplot (Debian: apt install gnuplot-nox)");
  if (r.exit_code != 0) throw Error(ExitCode::kSoftware, "gnuplot failed on " + script_file + ": " + r.err);
  fs::remove(script_file);
}

PlotsReport run_plots_stage(const PipelineConfig& config, const PlotsOptions& options) {
  const auto& u = config.downstream.umap_eval;
  if (u.n_components != 2) {
    throw ConfigError(config.source + ": downstream_analyses.umap_eval.n_components is " +
                      std::to_string(u.n_components) + "; the plots stage draws 2-D embeddings (use 2)");
  }
  const RunLayout layout(config);
  const std::string features_file = options.features_file.empty() ? layout.features : options.features_file;
  const std::string log_file =
      options.training_log.empty() ? layout.model.training_log() : options.training_log;

  PlotsReport report;
  report.directory = layout.plots_dir;
  make_directories(report.directory);
  const Renderer render{options.gnuplot, report.directory, &report};

  const FeatureSet set = read_plotted_features(features_file, u);
  const std::vector<float> xy = umap_layout(set, u, report);
  const std::string model = model_description(set);
  draw_umap(config, set, xy, model, render);
  const std::vector<TrainingLogLine> epochs = draw_training(config, log_file, render, report);
  const json knn = draw_knn(layout.knn_json, render, report);

  report.index_html = layout.plots_index;
  write_file_atomic(report.index_html, index_html(config, {features_file, model, set, epochs, knn}, report));
  return report;
}

}  // namespace pcdino::pipelines
