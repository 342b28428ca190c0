// The CLS feature stage: rows equal the ViT's CLS output on the preprocessed held-out images, in dataset
// order with their labels and paths; a checkpoint that does not fit the data is refused with its name.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../lib/synthetic.hpp"
#include "../lib/temp_dir.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/pipelines/extract.hpp"
#include "pcdino/pipelines/features.hpp"
#include "pcdino/pipelines/labels.hpp"
#include "pcdino/train/checkpoint.hpp"

namespace pcdino::pipelines {
namespace {

using namespace pcdino::train;  // the models and checkpoints the stage reads

PipelineConfig config_for(const test::TempDir& d) {
  PipelineConfig c = parse_config(R"(
meta:
  name_of_run: run
  seed: 3
  train_datasetsplit_fraction: 0.5
train_scDINO:
  hyperparameters:
    arch: vit_tiny
    patch_size: 4
    out_dim: 16
downstream_analyses:
  compute_cls_features:
    batch_size_per_gpu: 3
    resize: false
)",
                                  "extract.yaml");
  c.meta.dataset_dir = d / "data";
  c.meta.output_dir = d / "out";
  return c;
}

// A checkpoint of a fresh vit_tiny (patch 4, 12-px images) with `channels` input channels.
MultiCropWrapper write_checkpoint(const std::string& path, int channels) {
  torch::manual_seed(1);
  VitOptions o = VitOptions::preset("vit_tiny", 4, channels, 12);
  MultiCropWrapper student(VisionTransformer(o), DinoHead(o.embed_dim, 16));
  MultiCropWrapper teacher(VisionTransformer(o), DinoHead(o.embed_dim, 16));
  torch::optim::AdamW opt(student->parameters());
  DinoLoss loss(16, 4, 0.04, 0.04, 0, 1);
  CheckpointState state;
  state.epoch = 3;
  state.args = {{"arch", "vit_tiny"}};
  save_checkpoint(path, student, teacher, opt, loss, state);
  return teacher;
}

TEST(Extract, RowsAreTheTeachersClsTokensInDatasetOrder) {
  test::TempDir d;
  test::write_synthetic_dataset(d / "data", 3, 4, 12, PixelType::kUint8, {{false, 20}}, 9);
  const PipelineConfig c = config_for(d);
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.4}, {0.2}}));
  const std::string ckpt = d / "out/run/scDINO_ViTs/dino_vit/checkpoint.pth";
  MultiCropWrapper teacher = write_checkpoint(ckpt, 1);

  MpiWorld world;
  ExtractOptions o;
  o.threads = 1;
  const ExtractReport r = run_extract_stage(c, world, o);
  EXPECT_EQ(r.images, 6U);  // half of 12 held out
  EXPECT_EQ(r.dim, 192U);
  EXPECT_EQ(r.epoch, 3);
  const FeatureSet f = read_features(d / "out/run/CLS_features/features.h5");
  const Dataset ds = Dataset::open(c.meta.dataset_dir);
  const auto held = held_out_images(c, ds);
  ASSERT_EQ(f.rows, held.size());
  EXPECT_TRUE(std::is_sorted(f.indices.begin(), f.indices.end()));
  EXPECT_EQ(f.checkpoint, ckpt);
  EXPECT_EQ(f.checkpoint_key, "teacher");
  teacher->backbone->eval();
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < f.rows; ++i) {
    EXPECT_EQ(f.indices[i], static_cast<std::int64_t>(held[i]));
    EXPECT_EQ(f.paths[i], ds.relative_path(held[i]));
    EXPECT_EQ(f.class_names[static_cast<std::size_t>(f.labels[i])], ds.labels()[ds.label_index(held[i])]);
    Image img = ds.load(held[i], ImageTransform{});
    const auto x = (torch::from_blob(img.data.data(), {1, 1, 12, 12}) - 0.4) / 0.2;
    const auto expected = torch::nn::functional::normalize(
        teacher->backbone->forward(x), torch::nn::functional::NormalizeFuncOptions().dim(1));
    const auto got = torch::from_blob(const_cast<float*>(f.features.data() + i * f.dim), {1, 192});
    EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-6)) << "row " << i;
    EXPECT_NEAR(got.norm().item<double>(), 1.0, 1e-5);
  }
  // The workshop's CSV exports beside it.
  EXPECT_TRUE(std::filesystem::exists(d / "out/run/CLS_features/channel_all_model_checkpoint_features.csv"));
  EXPECT_TRUE(std::filesystem::exists(d / "out/run/CLS_features/class_labels.csv"));
}

TEST(Extract, CheckpointWithAnotherChannelCountIsRefusedByName) {
  test::TempDir d;
  test::write_synthetic_dataset(d / "data", 2, 3, 12, PixelType::kUint8, {{false, 20}}, 9);
  const PipelineConfig c = config_for(d);
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.4}, {0.2}}));
  const std::string ckpt = d / "three_channels.pth";
  write_checkpoint(ckpt, 3);
  MpiWorld world;
  ExtractOptions o;
  o.checkpoint = ckpt;
  try {
    run_extract_stage(c, world, o);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(ckpt), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 input channels"), std::string::npos) << e.what();
  }
}

TEST(Extract, NotAViTCheckpointIsRefusedByName) {
  test::TempDir d;
  const std::string path = d / "other.pth";
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  c10::Dict<std::string, torch::Tensor> weights;
  weights.insert("fc.weight", torch::zeros({2, 2}));
  top.insert("teacher", weights);
  const auto bytes = torch::pickle_save(top);
  write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
  test::write_synthetic_dataset(d / "data", 2, 3, 12, PixelType::kUint8, {{false, 20}}, 9);
  const PipelineConfig c = config_for(d);
  write_file_atomic(d / "out/run/mean_and_std_of_dataset.txt", format_mean_std({{0.4}, {0.2}}));
  MpiWorld world;
  ExtractOptions o;
  o.checkpoint = path;
  try {
    run_extract_stage(c, world, o);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("patch_embed.proj.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pcdino::pipelines
