// Checkpoints: written by C++, read back bit-exactly, and readable by Python's torch.load with the
// reference's keys and names.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/train/checkpoint.hpp"

namespace pcdino::train {
namespace {

MultiCropWrapper tiny_model(int channels = 1) {
  VitOptions o = VitOptions::preset("vit_tiny", 4, channels, 12);
  o.depth = 2;
  return MultiCropWrapper(VisionTransformer(o), DinoHead(192, 16, true, 32, 8));
}

std::string run_python(const std::string& code) {
  const std::string cmd = "/usr/bin/python3 -c '" + code + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
  return out;
}

TEST(Checkpoint, RoundTripIsBitExactAndPythonReadsIt) {
  test::TempDir d;
  torch::manual_seed(1);
  auto student = tiny_model(), teacher = tiny_model();
  torch::optim::AdamW opt(student->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss(16, 4, 0.04, 0.04, 0, 2);
  // One real step so that the optimizer has state and the centre moved.
  std::vector<torch::Tensor> crops = {torch::randn({2, 1, 12, 12}), torch::randn({2, 1, 12, 12}),
                                      torch::randn({2, 1, 8, 8}), torch::randn({2, 1, 8, 8})};
  const auto t_out = teacher->forward(std::vector<torch::Tensor>(crops.begin(), crops.begin() + 2));
  loss(student->forward(crops), t_out, 0).backward();
  opt.step();
  const std::string path = d / "checkpoint.pth";
  save_checkpoint(path, student, teacher, opt, loss,
                  {3, 0, {{"arch", "vit_tiny"}, {"patch_size", "4"}}, {}, {}});
  const auto rng_after_save = torch::rand({3});

  torch::manual_seed(999);  // a different generator state and fresh weights
  auto student2 = tiny_model(), teacher2 = tiny_model();
  torch::optim::AdamW opt2(student2->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss2(16, 4, 0.04, 0.04, 0, 2);
  const CheckpointState state = load_checkpoint(path, student2, teacher2, opt2, loss2);
  EXPECT_EQ(state.epoch, 3);
  EXPECT_EQ(state.args.at("arch"), "vit_tiny");
  EXPECT_TRUE(torch::equal(torch::rand({3}), rng_after_save)) << "generator state restored";
  const auto a = student->named_parameters(), b = student2->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  for (const auto& p : teacher->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), teacher2->named_parameters()[p.key()])) << p.key();
  }
  EXPECT_TRUE(torch::equal(loss.center, loss2.center));
  // The same next step from both: the optimizer state came back too.
  for (auto* o :
       {static_cast<torch::optim::Optimizer*>(&opt), static_cast<torch::optim::Optimizer*>(&opt2)}) {
    for (auto& p : o == &opt ? student->parameters() : student2->parameters())
      p.mutable_grad() = torch::ones_like(p);
    o->step();
  }
  EXPECT_TRUE(torch::equal(student->backbone->cls_token, student2->backbone->cls_token));

  const std::string py =
      run_python("import torch; c = torch.load(\"" + path +
                 "\"); "
                 "print(sorted(c.keys())); print(c[\"epoch\"], c[\"args\"][\"arch\"]); "
                 "print(tuple(c[\"teacher\"][\"backbone.patch_embed.proj.weight\"].shape)); "
                 "print(\"module.head.last_layer.weight_g\" in c[\"student\"], "
                 "tuple(c[\"dino_loss\"][\"center\"].shape))");
  EXPECT_NE(
      py.find("['args', 'dino_loss', 'epoch', 'iteration', 'optimizer', 'rng_state', 'student', 'teacher']"),
      std::string::npos)
      << py << "(python3-torch is needed: scripts/install-deps installs it)";
  EXPECT_NE(py.find("3 vit_tiny"), std::string::npos) << py;
  EXPECT_NE(py.find("(192, 1, 4, 4)"), std::string::npos) << py;
  EXPECT_NE(py.find("True (1, 16)"), std::string::npos) << py;

  const auto weights = read_state_dict(path, "teacher");
  EXPECT_EQ(weights.count("cls_token"), 1u) << "backbone. prefix stripped";
  EXPECT_EQ(weights.count("head.mlp.0.weight"), 1u);
}

TEST(Checkpoint, AnotherArchitectureIsRefusedNamingTheParameter) {
  test::TempDir d;
  auto student = tiny_model(1), teacher = tiny_model(1);
  torch::optim::AdamW opt(student->parameters(), torch::optim::AdamWOptions(1e-3));
  DinoLoss loss(16, 4, 0.04, 0.04, 0, 2);
  save_checkpoint(d / "c.pth", student, teacher, opt, loss, {});
  auto other = tiny_model(5), other_teacher = tiny_model(5);
  torch::optim::AdamW opt5(other->parameters(), torch::optim::AdamWOptions(1e-3));
  try {
    load_checkpoint(d / "c.pth", other, other_teacher, opt5, loss);
    FAIL() << "5-channel model loaded a 1-channel checkpoint";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("module.backbone.patch_embed.proj.weight' has shape [192, 1, 4, 4]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(load_checkpoint(d / "missing.pth", other, other_teacher, opt5, loss), NoInputError);
}

}  // namespace
}  // namespace pcdino::train
