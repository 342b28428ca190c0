#include "pcdino/core/run_files.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "pcdino/core/error.hpp"

namespace pcdino {

namespace {
std::string in(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}
}  // namespace

std::string ModelFiles::checkpoint() const {
  return in(dir, fmt::format("{}.pth", kCheckpointPrefix));
}
std::string ModelFiles::previous_checkpoint() const {
  return in(dir, fmt::format("{}.prev.pth", kCheckpointPrefix));
}
std::string ModelFiles::epoch_checkpoint(int epoch) const {
  return in(dir, fmt::format("{}{:04}.pth", kCheckpointPrefix, epoch));
}
std::string ModelFiles::training_log() const {
  return in(dir, "log.txt");
}
std::string ModelFiles::metrics() const {
  return in(dir, "metrics.jsonl");
}

RunLayout::RunLayout(const PipelineConfig& config)
    : run_dir(config.run_dir()),
      mean_std(in(run_dir, "mean_and_std_of_dataset.txt")),
      config_dump(in(run_dir, "run_config_dump.yaml")),
      skipped_images(in(run_dir, "skipped_images.txt")),
      model{in(in(run_dir, "scDINO_ViTs"), config.train.dino_vit_name)},
      features_dir(in(run_dir, "CLS_features")),
      features(in(features_dir, "features.h5")),
      knn_dir(in(run_dir, "kNN")),
      knn_text(in(knn_dir, "global_kNN.txt")),
      knn_json(in(knn_dir, "knn.json")),
      plots_dir(in(run_dir, "plots")),
      plots_index(in(plots_dir, "index.html")),
      logs_dir(in(run_dir, "logs")),
      submitted_config(in(logs_dir, "submitted_pipeline.yaml")),
      job_state(in(logs_dir, "pipeline_jobs.json")),
      doctor_report(in(logs_dir, "doctor.json")) {}

std::string RunLayout::stage_script(const std::string& stage) const {
  return in(logs_dir, stage + ".sbatch");
}
std::string RunLayout::stage_marker(const std::string& stage) const {
  return in(logs_dir, stage + ".complete");
}
std::string RunLayout::stage_restarts(const std::string& stage) const {
  return in(logs_dir, stage + "_restarts.jsonl");
}
std::string RunLayout::stage_output(const std::string& stage, const std::string& job, bool error) const {
  return in(logs_dir, stage + (error ? "_err_" : "_out_") + job + (error ? ".err" : ".out"));
}

std::string features_csv(const std::string& dir, const std::string& channel_names, const std::string& model) {
  return in(dir, "channel" + channel_names + "_model_" + model + "_features.csv");
}
std::string class_labels_csv(const std::string& dir) {
  return in(dir, "class_labels.csv");
}
std::string image_paths_csv(const std::string& dir) {
  return in(dir, "image_paths.csv");
}

std::string format_mean_std(const MeanStdValues& values) {
  const nlohmann::json j = {{"mean", values.mean}, {"std", values.std}};
  return j.dump() + "\n";
}

MeanStdValues read_mean_std(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NoInputError("cannot read mean/std file '" + path + "' (run `pcdino meanstd` first)");
  MeanStdValues v;
  try {
    const auto j = nlohmann::json::parse(in);
    v.mean = j.at("mean").get<std::vector<double>>();
    v.std = j.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": expected {\"mean\": [...], \"std\": [...]}: " + e.what());
  }
  if (v.mean.size() != v.std.size() || v.mean.empty()) {
    throw DataError(path + ": \"mean\" and \"std\" must be non-empty lists of the same length");
  }
  for (double s : v.std) {
    if (!(s > 0)) throw DataError(path + ": every std must be > 0 (a constant channel cannot be normalised)");
  }
  return v;
}

namespace {

using nlohmann::json;

// A JSON line that parses but is not a record of the file's kind.
struct BadRecord : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Calls `record` with each non-blank line of the JSON-lines file `path`; a line that is not JSON or that
// `record` cannot use is a DataError naming the file, the line and `what`
// it should be.
void for_each_json_line(const std::string& path, const std::string& what,
                        const std::function<void(const json&)>& record) {
  std::ifstream in(path);
  if (!in) throw NoInputError("cannot read " + what + " file '" + path + "'");
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      record(json::parse(line));
    } catch (const std::exception& e) {  // json::exception or BadRecord: `record` throws nothing else
      throw DataError(path + ":" + std::to_string(number) + ": not a " + what + " record (" + e.what() + ")");
    }
  }
}

std::optional<double> optional_number(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

constexpr std::pair<MetricsRecord::Kind, const char*> kRecordKinds[] = {
    {MetricsRecord::Kind::kStart, "start"},
    {MetricsRecord::Kind::kIteration, "iteration"},
    {MetricsRecord::Kind::kEpoch, "epoch"},
};

}  // namespace

std::string format_training_log_line(const TrainingLogLine& l) {
  json j{{"epoch", l.epoch}, {"train_loss", l.loss}, {"train_lr", l.lr}, {"train_wd", l.wd}};
  if (l.teacher_entropy) j["train_teacher_entropy"] = *l.teacher_entropy;
  if (l.kl) j["train_kl"] = *l.kl;
  if (l.online_knn_top1) j["online_knn_top1"] = *l.online_knn_top1;
  return j.dump();
}

std::vector<TrainingLogLine> read_training_log(const std::string& path) {
  std::vector<TrainingLogLine> lines;
  for_each_json_line(path, "training log (log.txt)", [&lines](const json& j) {
    TrainingLogLine l;
    l.epoch = j.at("epoch").get<int>();
    l.loss = j.at("train_loss").get<double>();
    l.lr = j.at("train_lr").get<double>();
    l.wd = j.value("train_wd", 0.0);
    l.teacher_entropy = optional_number(j, "train_teacher_entropy");
    l.kl = optional_number(j, "train_kl");
    l.online_knn_top1 = optional_number(j, "online_knn_top1");
    lines.push_back(l);
  });
  return lines;
}

std::string format_metrics_record(const MetricsRecord& r) {
  json j;
  for (const auto& [kind, name] : kRecordKinds) {
    if (kind == r.kind) j["record"] = name;
  }
  if (r.kind != MetricsRecord::Kind::kStart) {
    j.update({{"epoch", r.epoch},
              {"loss", r.loss},
              {"teacher_entropy", r.teacher_entropy},
              {"kl", r.kl},
              {"lr", r.lr},
              {"wd", r.wd},
              {"momentum", r.momentum}});
  }
  if (r.kind == MetricsRecord::Kind::kIteration) j["iteration"] = r.iteration;
  if (r.kind == MetricsRecord::Kind::kEpoch) {
    const auto& p = r.seconds_per_step;
    j.update({{"images_per_second", r.images_per_second},
              {"eta_seconds", r.eta_seconds},
              {"seconds_per_step",
               {{"data_wait", p.data_wait},
                {"forward", p.forward},
                {"backward", p.backward},
                {"update", p.update}}},
              {"phase_clock", r.phase_clock}});
    if (r.kernel_seconds_per_step) j["kernel_seconds_per_step"] = *r.kernel_seconds_per_step;
    if (r.loader_seconds_per_batch) j["loader_seconds_per_batch"] = *r.loader_seconds_per_batch;
  }
  if (r.online_knn_top1) j["online_knn_top1"] = *r.online_knn_top1;
  return j.dump();
}

std::vector<MetricsRecord> read_metrics(const std::string& path) {
  std::vector<MetricsRecord> records;
  for_each_json_line(path, "training metrics (metrics.jsonl)", [&records](const json& j) {
    MetricsRecord r;
    const std::string kind = j.at("record").get<std::string>();
    const auto* found = std::find_if(std::begin(kRecordKinds), std::end(kRecordKinds),
                                     [&](const auto& k) { return kind == k.second; });
    if (found == std::end(kRecordKinds)) throw BadRecord("unknown record '" + kind + "'");
    r.kind = found->first;
    r.online_knn_top1 = optional_number(j, "online_knn_top1");
    if (r.kind != MetricsRecord::Kind::kStart) {
      r.epoch = j.at("epoch").get<int>();
      r.loss = j.at("loss").get<double>();
      r.teacher_entropy = j.at("teacher_entropy").get<double>();
      r.kl = j.at("kl").get<double>();
      r.lr = j.at("lr").get<double>();
      r.wd = j.at("wd").get<double>();
      r.momentum = j.at("momentum").get<double>();
    }
    if (r.kind == MetricsRecord::Kind::kIteration) r.iteration = j.at("iteration").get<long>();
    if (r.kind == MetricsRecord::Kind::kEpoch) {
      r.images_per_second = j.at("images_per_second").get<double>();
      r.eta_seconds = j.at("eta_seconds").get<double>();
      const json& p = j.at("seconds_per_step");
      r.seconds_per_step = {p.at("data_wait").get<double>(), p.at("forward").get<double>(),
                            p.at("backward").get<double>(), p.at("update").get<double>()};
      r.phase_clock = j.value("phase_clock", std::string("host_clock"));
      r.kernel_seconds_per_step = optional_number(j, "kernel_seconds_per_step");
      r.loader_seconds_per_batch = optional_number(j, "loader_seconds_per_batch");
    }
    records.push_back(r);
  });
  return records;
}

}  // namespace pcdino
