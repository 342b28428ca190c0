// Unit tests of the DINO model pieces against shapes, the reference's names and parameter count, and
// values computed independently here.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "pcdino/train/dino.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/schedules.hpp"
#include "pcdino/train/vit.hpp"

namespace pcdino::train {
namespace {

VisionTransformer tiny(int channels = 1, int image = 28, int patch = 4, int depth = 2) {
  VitOptions o = VitOptions::preset("vit_tiny", patch, channels, image);
  o.depth = depth;
  return VisionTransformer(o);
}

TEST(Vit, AttentionAndBlockKeepShape) {
  torch::manual_seed(0);
  Attention attn(192, 3);
  Block block(192, 3, 4.0, 0.1);
  const auto x = torch::randn({2, 5, 192});
  EXPECT_EQ(attn(x).sizes(), x.sizes());
  EXPECT_EQ(block(x).sizes(), x.sizes());
  block->eval();
  EXPECT_TRUE(torch::equal(block(x), block(x))) << "drop path must be off in eval mode";
}

TEST(Vit, ClsEmbeddingForGlobalAndLocalCrops) {
  torch::manual_seed(0);
  auto vit = tiny(5, 28, 4);
  EXPECT_EQ(vit->forward(torch::randn({3, 5, 28, 28})).sizes(), (std::vector<int64_t>{3, 192}));
  EXPECT_EQ(vit->prepare_tokens(torch::randn({3, 5, 16, 16})).sizes(),
            (std::vector<int64_t>{3, 1 + 16, 192}));
  EXPECT_EQ(vit->forward(torch::randn({2, 5, 16, 12})).sizes(), (std::vector<int64_t>{2, 192}));
}

TEST(Vit, PositionalEmbeddingInterpolation) {
  torch::manual_seed(0);
  auto vit = tiny(1, 28, 4);
  EXPECT_TRUE(torch::equal(vit->interpolate_pos_encoding(49, 28, 28), vit->pos_embed))
      << "same size: unchanged";
  {
    torch::NoGradGuard no_grad;
    vit->pos_embed.slice(1, 1).fill_(0.25);  // a constant field stays constant under bicubic resizing
    vit->pos_embed.slice(1, 0, 1).fill_(-1.0);
  }
  const auto small = vit->interpolate_pos_encoding(16, 16, 16);
  ASSERT_EQ(small.sizes(), (std::vector<int64_t>{1, 17, 192}));
  EXPECT_TRUE(torch::allclose(small.slice(1, 1), torch::full({1, 16, 192}, 0.25), 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(small.slice(1, 0, 1), vit->pos_embed.slice(1, 0, 1))) << "CLS position is kept";
  EXPECT_EQ(vit->interpolate_pos_encoding(8 * 3, 32, 12).size(1), 1 + 8 * 3) << "rows x cols grid";
}

TEST(Vit, DepthFromTheConfiguration) {
  DinoHyperparameters h;
  h.arch = "vit_tiny";
  h.patch_size = 7;
  h.global_crops_size = 28;
  EXPECT_EQ(VitOptions::from_config(h, 1).depth, 12);  // the preset's
  h.depth = 4;
  h.drop_path_rate = 0.25;
  const VitOptions o = VitOptions::from_config(h, 1);
  EXPECT_EQ(o.depth, 4);
  EXPECT_EQ(o.embed_dim, 192);
  EXPECT_DOUBLE_EQ(o.drop_path_rate, 0.25);
  EXPECT_EQ(VisionTransformer(o)->blocks->size(), 4U);
}

TEST(Vit, ParameterNamesAndCountMatchTheReference) {
  VisionTransformer vit(VitOptions::preset("vit_small", 16, 3, 224));
  std::set<std::string> names;
  int64_t count = 0;
  for (const auto& p : vit->named_parameters()) {
    names.insert(p.key());
    count += p.value().numel();
  }
  for (const char* n :
       {"cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias", "blocks.0.norm1.weight",
        "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias", "blocks.0.attn.proj.weight",
        "blocks.11.mlp.fc1.weight", "blocks.11.mlp.fc2.bias", "norm.weight", "norm.bias"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
  // ViT-S/16 without a classifier: 12 blocks of 12 D^2 + 13 D, patch embedding, CLS, 197 positions, norm.
  const int64_t d = 384;
  EXPECT_EQ(count, 12 * (12 * d * d + 13 * d) + (3 * 16 * 16 * d + d) + d + 197 * d + 2 * d);
  EXPECT_EQ(count, 21665664);
}

TEST(DinoHead, NormalisedWeightNormHeadWithFrozenNorm) {
  torch::manual_seed(0);
  DinoHead head(192, 64, /*norm_last_layer=*/true, 128, 32);
  EXPECT_EQ(head(torch::randn({4, 192})).sizes(), (std::vector<int64_t>{4, 64}));
  EXPECT_FALSE(head->weight_g.requires_grad());
  EXPECT_TRUE(torch::allclose(head->last_layer_weight().norm(2, {1}), torch::ones({64}), 1e-5, 1e-6));
  MultiCropWrapper model(tiny(), DinoHead(192, 64, false, 128, 32));
  EXPECT_TRUE(model->head->weight_g.requires_grad());
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  for (const char* n : {"backbone.cls_token", "head.mlp.0.weight", "head.mlp.2.bias", "head.mlp.4.weight",
                        "head.last_layer.weight_g", "head.last_layer.weight_v"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
  // Two 28-px globals and three 16-px locals of batch 2 -> 10 rows, in crop order.
  std::vector<torch::Tensor> crops = {torch::randn({2, 1, 28, 28}), torch::randn({2, 1, 28, 28}),
                                      torch::randn({2, 1, 16, 16}), torch::randn({2, 1, 16, 16}),
                                      torch::randn({2, 1, 16, 16})};
  const auto out = model(crops);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{10, 64}));
  model->eval();
  EXPECT_TRUE(
      torch::allclose(model(crops).slice(0, 4, 6), model->head(model->backbone(crops[2])), 1e-5, 1e-5));
}

TEST(DinoLoss, EqualsAnIndependentComputation) {
  torch::manual_seed(3);
  const int out_dim = 4, ncrops = 3, batch = 2, epoch = 1;
  const auto student = torch::randn({ncrops * batch, out_dim}, torch::kFloat64);
  const auto teacher = torch::randn({2 * batch, out_dim}, torch::kFloat64);
  DinoLoss loss(out_dim, ncrops, 0.04, 0.07, 3, 10, 0.1, 0.9);
  loss.center = torch::tensor({{0.1, -0.2, 0.3, 0.0}}, torch::kFloat64);
  const double got = loss(student, teacher, epoch).item<double>();

  const double t_temp = 0.04 + (0.07 - 0.04) * epoch / 2.0;  // linspace(0.04, 0.07, 3)[1]
  EXPECT_NEAR(loss.teacher_temperature(epoch), t_temp, 1e-12);
  const double c[4] = {0.1, -0.2, 0.3, 0.0};
  double total = 0;
  int terms = 0;
  for (int iq = 0; iq < 2; ++iq) {
    for (int v = 0; v < ncrops; ++v) {
      if (v == iq) continue;
      double mean = 0;
      for (int b = 0; b < batch; ++b) {
        double q[4], zt = 0, zs = 0;
        for (int k = 0; k < out_dim; ++k)
          zt += std::exp((teacher[iq * batch + b][k].item<double>() - c[k]) / t_temp);
        for (int k = 0; k < out_dim; ++k)
          q[k] = std::exp((teacher[iq * batch + b][k].item<double>() - c[k]) / t_temp) / zt;
        for (int k = 0; k < out_dim; ++k) zs += std::exp(student[v * batch + b][k].item<double>() / 0.1);
        double ce = 0;
        for (int k = 0; k < out_dim; ++k)
          ce -= q[k] * (student[v * batch + b][k].item<double>() / 0.1 - std::log(zs));
        mean += ce / batch;
      }
      total += mean;
      ++terms;
    }
  }
  EXPECT_EQ(terms, 4);  // (2 teacher views) x (3 student views) minus the 2 same-view pairs
  EXPECT_NEAR(got, total / terms, 1e-10);
  for (int k = 0; k < out_dim; ++k) {
    const double batch_mean = teacher.select(1, k).mean().item<double>();
    EXPECT_NEAR(loss.center[0][k].item<double>(), 0.9 * c[k] + 0.1 * batch_mean, 1e-12);
  }
}

// h(P_t) and KL(P_t || P_s) on fixed outputs, by hand: a 2-dimensional output, centre 0, teacher
// temperature 0.5, student temperature 0.1, one image, 3 crops.
TEST(DinoLoss, TeacherEntropyAndKlByHand) {
  DinoLoss loss(2, 3, 0.5, 0.5, 0, 1, 0.1, 0.9);
  // Teacher logits / 0.5: view 0 (0, 0) -> uniform; view 1 (ln 3 / 2, 0) -> (3/4, 1/4).
  const auto teacher = torch::tensor({{0.0, 0.0}, {std::log(3.0) / 2, 0.0}}, torch::kFloat64);
  // Student logits / 0.1: view 0 (ln 3, 0) -> (3/4, 1/4); views 1 and 2 (0, 0) -> uniform.
  const auto student = torch::tensor({{std::log(3.0) / 10, 0.0}, {0.0, 0.0}, {0.0, 0.0}}, torch::kFloat64);
  const double value = loss(student, teacher, 0).item<double>();
  const double h_uniform = std::log(2.0);
  const double h_34 = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));  // 0.5623
  EXPECT_NEAR(loss.teacher_entropy.item<double>(), (h_uniform + h_34) / 2, 1e-6);
  // Pairs (teacher view, student view): (0, 1), (0, 2): KL(uniform || uniform) = 0; (1, 0): KL((3/4, 1/4)
  // || (3/4, 1/4)) = 0; (1, 2): KL((3/4, 1/4) || uniform) = ln 2 - h_34.
  const double kl = (0 + 0 + 0 + (std::log(2.0) - h_34)) / 4;
  const double entropy_mean_over_pairs = (2 * h_uniform + 2 * h_34) / 4;
  EXPECT_NEAR(value, entropy_mean_over_pairs + kl, 1e-9);
  EXPECT_NEAR(value - loss.teacher_entropy.item<double>(), kl, 1e-6);

  // The two collapses: a teacher whose outputs are all equal (uniform after centring) has h = ln 2;
  // one whose first dimension dominates has h near 0. The KL of a student that matches is 0 in both.
  DinoLoss uniform(2, 3, 0.5, 0.5, 0, 1, 0.1, 0.9);
  uniform(torch::zeros({3, 2}, torch::kFloat64), torch::zeros({2, 2}, torch::kFloat64), 0);
  EXPECT_NEAR(uniform.teacher_entropy.item<double>(), std::log(2.0), 1e-6);
  DinoLoss one_hot(2, 3, 0.5, 0.5, 0, 1, 0.1, 0.9);
  const auto peaked = torch::tensor({{20.0, 0.0}, {20.0, 0.0}}, torch::kFloat64);
  const double peaked_loss =
      one_hot(torch::tensor({{20.0, 0.0}, {20.0, 0.0}, {20.0, 0.0}}, torch::kFloat64), peaked, 0)
          .item<double>();
  EXPECT_LT(one_hot.teacher_entropy.item<double>(), 1e-6);
  EXPECT_LT(peaked_loss - one_hot.teacher_entropy.item<double>(), 1e-6);
}

TEST(Schedules, EndPoints) {
  const auto lr = cosine_schedule(1.0, 0.1, 10, 5, 2, 0.0);
  ASSERT_EQ(lr.size(), 50u);
  EXPECT_DOUBLE_EQ(lr[0], 0.0);
  EXPECT_DOUBLE_EQ(lr[9], 1.0);   // last warm-up iteration reaches the base (linspace includes it)
  EXPECT_DOUBLE_EQ(lr[10], 1.0);  // cosine starts at the base
  EXPECT_NEAR(lr[49], 0.1 + 0.45 * (1 + std::cos(M_PI * 39 / 40)), 1e-12);
  EXPECT_GT(lr[49], 0.1);
  const auto m = cosine_schedule(0.996, 1.0, 4, 3);
  EXPECT_DOUBLE_EQ(m.front(), 0.996);
  EXPECT_NEAR(m.back(), 1.0, 1e-4);
  EXPECT_THROW(cosine_schedule(1, 0, 2, 3, 3), std::invalid_argument);
  const auto temps = teacher_temperature_schedule(0.04, 0.07, 3, 5);
  const std::vector<double> expected = {0.04, 0.055, 0.07, 0.07, 0.07};
  ASSERT_EQ(temps.size(), expected.size());
  for (std::size_t i = 0; i < temps.size(); ++i) EXPECT_NEAR(temps[i], expected[i], 1e-15) << i;
  EXPECT_DOUBLE_EQ(scaled_learning_rate(0.0005, 512), 0.001);
}

// train_scDINO.time_budget_minutes in steps: 100 s spent, 2 s a step, epochs of 10 steps ending in 5 s of
// checkpoint and kNN, 20 s kept for the run's last kNN, 50 epochs uncut (500 steps).
TEST(Schedules, StepsWithinATimeBudget) {
  const StepCosts costs{2, 5, 20};
  // 600 s: 480 s for steps and epoch ends after 20 steps done: 10 steps + 1 end = 25 s an epoch, so 19
  // whole epochs (475 s); one step more, with its epoch's end, would take 7 s.
  const std::size_t t = steps_within_budget(500, 10, 20, 600, 100, costs);
  EXPECT_EQ(t, 20u + 190u);
  // What the budget leaves unused is less than one more step and its epoch end, never an epoch's worth.
  const auto spent = [&](std::size_t total) {
    const std::size_t ends = total / 10 - 2 + (total % 10 != 0 ? 1 : 0);
    return 100 + 2.0 * static_cast<double>(total - 20) + 5.0 * static_cast<double>(ends) + 20;
  };
  EXPECT_LE(spent(t), 600);
  EXPECT_GT(spent(t + 1), 600);
  EXPECT_LT(600 - spent(t), costs.step_seconds + costs.epoch_end_seconds);
  // A decision inside an epoch: 25 steps done, its end at 30 (15 s), 18 whole epochs (450 s), and a last
  // epoch of 5 steps (15 s).
  EXPECT_EQ(steps_within_budget(500, 10, 25, 600, 100, costs), 25u + 5u + 18u * 10u + 5u);
  EXPECT_EQ(steps_within_budget(500, 10, 20, 1e9, 100, costs), 500u) << "never more than the uncut run";
  EXPECT_EQ(steps_within_budget(500, 10, 20, 60, 100, costs), 20u) << "over budget already: it ends now";
  EXPECT_EQ(steps_within_budget(500, 10, 0, 60, 100, costs), 1u) << "at least one step";
  EXPECT_EQ(steps_within_budget(500, 10, 20, 600, 100, StepCosts{}), 500u) << "free steps all fit";
}

// A cut run's schedules end as the uncut run's: its last step reads the last value, from the step of the
// cut on the rest of the schedule is spread evenly, and a second cut continues from where the first was.
TEST(Schedules, ACutRunReadsTheWholeScheduleToItsEnd) {
  const ScheduleCut none{0, 0, 500, 500};
  for (std::size_t i : {0u, 1u, 250u, 499u}) EXPECT_EQ(none.index(i), i);
  const ScheduleCut cut = none.recut(30, 130);  // 100 steps left for indices 30..499
  EXPECT_EQ(cut.index(29), 29u) << "steps before the cut keep their own index";
  EXPECT_EQ(cut.index(30), 30u) << "no jump at the cut";
  EXPECT_EQ(cut.index(129), 499u) << "the last step reads the schedule's end";
  EXPECT_EQ(cut.index(80), 30u + 237u);  // half way: 50 of 99 steps of 469 indices, rounded
  for (std::size_t i = 31; i < 130; ++i) EXPECT_GT(cut.index(i), cut.index(i - 1)) << i;
  const ScheduleCut again = cut.recut(60, 200);  // the final estimate gives more steps
  EXPECT_EQ(again.index(60), cut.index(60));
  EXPECT_EQ(again.index(199), 499u);
  // The cosine learning rate of a cut run reaches min_lr at its last step.
  const auto lr = cosine_schedule(5e-4, 1e-6, 50, 10, 5);
  EXPECT_DOUBLE_EQ(lr[again.index(199)], lr.back());
}

TEST(Training, EmaFrozenLastLayerAndClipping) {
  torch::manual_seed(0);
  MultiCropWrapper student(tiny(), DinoHead(192, 16, false, 32, 8));
  MultiCropWrapper teacher(tiny(), DinoHead(192, 16, false, 32, 8));
  const auto t0 = teacher->backbone->cls_token.clone(), s0 = student->backbone->cls_token.clone();
  ema_update(*teacher, *student, 0.9);
  EXPECT_TRUE(torch::allclose(teacher->backbone->cls_token, 0.9 * t0 + 0.1 * s0));

  const auto out = student->forward(std::vector<torch::Tensor>{torch::randn({2, 1, 28, 28})});
  (out * 1000).pow(2).sum().backward();
  ASSERT_TRUE(student->head->weight_v.grad().defined());
  cancel_gradients_last_layer(1, student, 1);
  EXPECT_TRUE(student->head->weight_v.grad().defined()) << "from freeze_last_layer on, the layer trains";
  cancel_gradients_last_layer(0, student, 1);
  EXPECT_FALSE(student->head->weight_v.grad().defined()) << "frozen in epoch 0";
  EXPECT_TRUE(student->backbone->cls_token.grad().defined());

  const auto norms = clip_gradients(*student, 0.5);
  ASSERT_GT(norms.numel(), 0);
  for (const auto& p : student->parameters()) {
    if (p.grad().defined()) {
      EXPECT_LE(p.grad().norm().item<double>(), 0.5 + 1e-4);
    }
  }
}

}  // namespace
}  // namespace pcdino::train
