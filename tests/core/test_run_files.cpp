// The run layout's paths and the training records shared by the trainer (writer) and the plots (reader).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/run_files.hpp"

namespace pcdino {
namespace {

TEST(RunLayout, TheWorkshopsNamesUnderTheRunFolder) {
  PipelineConfig c;
  c.meta.output_dir = "/fsx/out";
  c.meta.name_of_run = "run1";
  c.train.dino_vit_name = "vit";
  const RunLayout l(c);
  EXPECT_EQ(l.run_dir, "/fsx/out/run1");
  EXPECT_EQ(l.mean_std, "/fsx/out/run1/mean_and_std_of_dataset.txt");
  EXPECT_EQ(l.model.checkpoint(), "/fsx/out/run1/scDINO_ViTs/vit/checkpoint.pth");
  EXPECT_EQ(l.model.epoch_checkpoint(7), "/fsx/out/run1/scDINO_ViTs/vit/checkpoint0007.pth");
  EXPECT_EQ(l.model.training_log(), "/fsx/out/run1/scDINO_ViTs/vit/log.txt");
  EXPECT_EQ(l.features, "/fsx/out/run1/CLS_features/features.h5");
  EXPECT_EQ(l.knn_text, "/fsx/out/run1/kNN/global_kNN.txt");
  EXPECT_EQ(l.plots_index, "/fsx/out/run1/plots/index.html");
  EXPECT_EQ(l.stage_output("train", "%j", true), "/fsx/out/run1/logs/train_err_%j.err");
  EXPECT_EQ(l.stage_marker("knn"), "/fsx/out/run1/logs/knn.complete");
}

TEST(TrainingRecords, LogLinesRoundTripAndDinosOwnLinesRead) {
  test::TempDir d;
  const TrainingLogLine ours{3, 4.25, 5e-4, 0.07, 5.5, 0.43, 71.25};
  // DINO's main_dino.py writes only these four keys.
  test::write_text(d / "log.txt",
                   format_training_log_line(ours) +
                       "\n\n{\"train_loss\": 6.1, \"train_lr\": 0.001, \"train_wd\": 0.04, \"epoch\": 0}\n");
  const auto lines = read_training_log(d / "log.txt");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].epoch, 3);
  EXPECT_DOUBLE_EQ(lines[0].loss, 4.25);
  EXPECT_EQ(lines[0].kl, std::optional<double>(0.43));
  EXPECT_EQ(lines[0].online_knn_top1, std::optional<double>(71.25));
  EXPECT_DOUBLE_EQ(lines[1].lr, 0.001);
  EXPECT_FALSE(lines[1].teacher_entropy.has_value());
  EXPECT_FALSE(lines[1].online_knn_top1.has_value());
}

TEST(TrainingRecords, MetricsRoundTripEveryKind) {
  test::TempDir d;
  MetricsRecord start, it, epoch;
  start.kind = MetricsRecord::Kind::kStart, start.online_knn_top1 = 59.0;
  it.kind = MetricsRecord::Kind::kIteration, it.iteration = 10;
  it.loss = 6.3, it.teacher_entropy = 6.0, it.kl = 0.3, it.lr = 1e-4, it.wd = 0.04, it.momentum = 0.99;
  epoch.kind = MetricsRecord::Kind::kEpoch;
  epoch.loss = 6.2, epoch.images_per_second = 110.5, epoch.seconds_per_step = {0.01, 0.1, 0.2, 0.03};
  epoch.phase_clock = "cuda_events", epoch.kernel_seconds_per_step = 0.25;
  epoch.loader_seconds_per_batch = 0.75;
  // An epoch record of a build before the phase clock was recorded: its times were the host's.
  auto old = nlohmann::json::parse(format_metrics_record(epoch));
  old.erase("phase_clock");
  test::write_text(d / "metrics.jsonl", format_metrics_record(start) + "\n" + format_metrics_record(it) +
                                            "\n" + format_metrics_record(epoch) + "\n" + old.dump() + "\n");
  const auto records = read_metrics(d / "metrics.jsonl");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].kind, MetricsRecord::Kind::kStart);
  EXPECT_EQ(records[0].online_knn_top1, std::optional<double>(59.0));
  EXPECT_EQ(records[1].kind, MetricsRecord::Kind::kIteration);
  EXPECT_EQ(records[1].iteration, 10);
  EXPECT_DOUBLE_EQ(records[1].momentum, 0.99);
  EXPECT_FALSE(records[1].online_knn_top1.has_value());
  EXPECT_EQ(records[2].kind, MetricsRecord::Kind::kEpoch);
  EXPECT_DOUBLE_EQ(records[2].images_per_second, 110.5);
  EXPECT_DOUBLE_EQ(records[2].seconds_per_step.backward, 0.2);
  EXPECT_EQ(records[2].phase_clock, "cuda_events");
  EXPECT_EQ(records[2].kernel_seconds_per_step, std::optional<double>(0.25));
  EXPECT_EQ(records[2].loader_seconds_per_batch, std::optional<double>(0.75));
  EXPECT_EQ(records[3].phase_clock, "host_clock");
  EXPECT_FALSE(records[1].kernel_seconds_per_step.has_value());
  EXPECT_FALSE(records[1].loader_seconds_per_batch.has_value());
}

TEST(TrainingRecords, BadLinesNameTheFileAndLine) {
  test::TempDir d;
  test::write_text(d / "metrics.jsonl", "{\"record\": \"start\"}\n{\"record\": \"restart\"}\n");
  try {
    read_metrics(d / "metrics.jsonl");
    FAIL() << "unknown record accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:2: not a training metrics"), std::string::npos)
        << e.what();
  }
  test::write_text(d / "log.txt", "{\"epoch\": 0, \"train_loss\": 6.1}\n");  // no train_lr
  EXPECT_THROW(read_training_log(d / "log.txt"), DataError);
  EXPECT_THROW(read_training_log(d / "missing.txt"), NoInputError);
}

}  // namespace
}  // namespace pcdino
