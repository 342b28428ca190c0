#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "../lib/synthetic.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/pipelines/meanstd.hpp"

namespace pcdino::pipelines {
namespace {

using test::TempDir;

TEST(Moments, MergeEqualsDirectComputation) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(3.0f, 2.0f);
  std::vector<float> all(10007);
  for (float& x : all) x = dist(rng);
  double sum = 0;
  for (float x : all) sum += x;
  const double mean = sum / all.size();
  double m2 = 0;
  for (float x : all) m2 += (x - mean) * (x - mean);
  // Uneven pieces, merged in two different trees.
  Moments left, right, whole;
  left.add(all.data(), 3);
  left.add(all.data() + 3, 5000);
  right.add(all.data() + 5003, 5004);
  left.merge(right);
  whole.add(all.data(), all.size());
  EXPECT_NEAR(left.mean, mean, 1e-12);
  EXPECT_NEAR(left.variance(), m2 / all.size(), 1e-10);
  EXPECT_NEAR(whole.variance(), m2 / all.size(), 1e-10);
  EXPECT_EQ(left.count, static_cast<double>(all.size()));
  Moments empty;
  empty.merge(Moments{});
  EXPECT_EQ(empty.variance(), 0.0);
}

PipelineConfig config_for(const std::string& dataset, const std::string& out, double fraction) {
  PipelineConfig c;
  c.source = "test";
  c.meta.dataset_dir = dataset;
  c.meta.output_dir = out;
  c.meta.name_of_run = "run";
  c.train.fraction_for_mean_std_calc = fraction;
  return c;
}

void expect_closed_form(const std::vector<test::ChannelSpec>& channels, PixelType type, int side,
                        const std::vector<int>& selection) {
  TempDir d;
  test::write_synthetic_dataset(d / "data", 3, 7, side, type, channels, 123);
  PipelineConfig c = config_for(d / "data", d / "out", 0.6);
  if (!selection.empty()) c.meta.selected_channel_combination_per_run = {selection};
  MpiWorld world;
  const MeanStdReport r = run_meanstd_stage(c, world, 2);
  EXPECT_EQ(r.total_images, 21u - static_cast<std::size_t>(std::floor(0.4 * 21)));
  const MeanStdValues written = read_mean_std(r.output_file);
  std::vector<int> order = selection;
  if (order.empty())
    for (std::size_t k = 0; k < channels.size(); ++k) order.push_back(static_cast<int>(k));
  ASSERT_EQ(written.mean.size(), order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto [mean, std] = test::closed_form(channels[static_cast<std::size_t>(order[k])], side * side);
    EXPECT_NEAR(written.mean[k], mean, 1e-7) << "channel " << order[k];
    EXPECT_NEAR(written.std[k], std, 1e-7) << "channel " << order[k];
  }
  EXPECT_TRUE(std::filesystem::exists(d.path() / "out/run/run_config_dump.yaml"));
}

TEST(MeanStdStage, FiveChannel16BitClosedForm) {
  expect_closed_form({{false, 1}, {false, 17}, {true, 0}, {false, 32}, {false, 63}}, PixelType::kUint16, 8,
                     {});
}

TEST(MeanStdStage, OneChannel8BitClosedForm) {
  expect_closed_form({{false, 9}}, PixelType::kUint8, 6, {});
}

TEST(MeanStdStage, SelectedChannelsInTheirOrder) {
  expect_closed_form({{false, 1}, {false, 17}, {true, 0}}, PixelType::kFloat32, 8, {2, 0});
}

TEST(MeanStdStage, CorruptImageFailsOrIsSkippedAndReported) {
  TempDir d;
  test::write_synthetic_dataset(d / "data", 2, 5, 8, PixelType::kUint16, {{false, 16}}, 7);
  const std::string bad = d / "data/class1/img3.tif";
  std::filesystem::resize_file(bad, 100);
  PipelineConfig c = config_for(d / "data", d / "out", 1.0);
  MpiWorld world;
  try {
    run_meanstd_stage(c, world, 2);
    FAIL() << "corrupt image accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(RunLayout(c).mean_std)) << "partial output left behind";

  c.meta.skip_corrupt = true;
  const MeanStdReport r = run_meanstd_stage(c, world, 2);
  EXPECT_EQ(r.total_images, 9u);
  EXPECT_EQ(r.skipped, 1u);
  std::ifstream report(RunLayout(c).skipped_images);
  std::string line;
  std::getline(report, line);
  EXPECT_NE(line.find(bad), std::string::npos) << line;
  EXPECT_NEAR(read_mean_std(r.output_file).mean[0], 16.0 / 64, 1e-9);
}

TEST(MeanStdStage, SkipsACorruptFirstImageOfTheSample) {
  TempDir d;
  test::write_synthetic_dataset(d / "data", 2, 5, 8, PixelType::kUint16, {{false, 16}, {true, 0}}, 9);
  PipelineConfig c = config_for(d / "data", d / "out", 1.0);
  c.meta.skip_corrupt = true;
  const Dataset ds = Dataset::open(d / "data", 0);
  const std::size_t first = mean_std_sample(ds.size(), 1.0, c.meta.seed).front();
  std::filesystem::resize_file(ds.source(first), 50);
  MpiWorld world;
  const MeanStdReport r = run_meanstd_stage(c, world, 2);
  EXPECT_EQ(r.total_images, 9u);
  EXPECT_EQ(read_mean_std(r.output_file).mean.size(), 2u) << "channel count from the images that were read";
}

TEST(MeanStdStage, ChannelOutOfRangeNamesTheKey) {
  TempDir d;
  test::write_synthetic_dataset(d / "data", 1, 2, 4, PixelType::kUint8, {{false, 3}}, 7);
  PipelineConfig c = config_for(d / "data", d / "out", 1.0);
  c.meta.selected_channel_combination_per_run = {{0, 2}};
  MpiWorld world;
  try {
    run_meanstd_stage(c, world, 1);
    FAIL() << "channel 2 of a 1-channel image accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("selected_channel_combination_per_run selects channel 2"),
              std::string::npos);
  }
}

TEST(RunFiles, MeanStdFileRoundTripAndErrors) {
  TempDir d;
  const MeanStdValues v{{0.1, 0.123456789012345678}, {0.2, 0.3}};
  test::write_text(d / "ms.txt", format_mean_std(v));
  const MeanStdValues back = read_mean_std(d / "ms.txt");
  EXPECT_EQ(back.mean, v.mean);
  EXPECT_EQ(back.std, v.std);
  test::write_text(d / "bad.txt", "{\"mean\": [0.1], \"std\": [0.0]}");
  EXPECT_THROW(read_mean_std(d / "bad.txt"), DataError);
  test::write_text(d / "bad2.txt", "{\"mean\": [0.1]}");
  EXPECT_THROW(read_mean_std(d / "bad2.txt"), DataError);
  EXPECT_THROW(read_mean_std(d / "none.txt"), NoInputError);
}

}  // namespace
}  // namespace pcdino::pipelines
