// The multi-tensor update (issue #22) against the per-tensor one it replaces: LibTorch's
// torch::optim::AdamW over 20 DINO steps of a real ViT and head with DINO's two parameter groups, the
// teacher's EMA and clipping as main_dino.py / utils.py write them per parameter, the scaled-dot-product
// attention against the written-out one, and checkpoints moving between the two optimizers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "../lib/temp_dir.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/dino.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/vit.hpp"

namespace pcdino::train {
namespace {

MultiCropWrapper model(bool fused_attention = true) {
  VitOptions o = VitOptions::preset("vit_tiny", 4, 1, 28);
  o.depth = 2;
  o.drop_path_rate = 0;  // the same forward on every call
  o.fused_attention = fused_attention;
  return MultiCropWrapper(VisionTransformer(o), DinoHead(192, 64, true, 64, 16));
}

void copy_parameters(MultiCropWrapper& to, MultiCropWrapper& from) {
  torch::NoGradGuard no_grad;
  auto t = to->parameters(), f = from->parameters();
  for (std::size_t i = 0; i < t.size(); ++i) t[i].copy_(f[i]);
}

// One DINO step's gradients on `m` (2 global 28-px and 2 local 16-px crops), with the last layer frozen
// while `frozen`, and clipped at 3.0 by the per-parameter reference loop.
void dino_gradients(MultiCropWrapper& m, MultiCropWrapper& teacher, DinoLoss& loss, bool frozen) {
  for (auto& p : m->parameters()) p.mutable_grad() = torch::Tensor();
  std::vector<torch::Tensor> crops = {torch::randn({4, 1, 28, 28}), torch::randn({4, 1, 28, 28}),
                                      torch::randn({4, 1, 16, 16}), torch::randn({4, 1, 16, 16})};
  const auto t = teacher->forward({crops[0], crops[1]});
  loss(m->forward(crops), t, 0).backward();
  cancel_gradients_last_layer(frozen ? 0 : 1, m, 1);
}

// Each optimizer's trained parameters get the other model's gradients (cloned), so that the update alone
// is compared.
void share_gradients(MultiCropWrapper& to, MultiCropWrapper& from) {
  auto t = to->parameters(), f = from->parameters();
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i].mutable_grad() = f[i].grad().defined() ? f[i].grad().clone() : torch::Tensor();
}

void set_schedule(torch::optim::Optimizer& opt, double lr, double wd) {
  static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options()).lr(lr).weight_decay(wd);
  static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[1].options()).lr(lr).weight_decay(0.0);
}

// Largest |a - b| relative to the largest |a| of every pair of parameters.
void expect_close(MultiCropWrapper& a, MultiCropWrapper& b, double relative) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) {
    const auto& q = pb[p.key()];
    const double scale = p.value().abs().max().item<double>();
    const double diff = (p.value() - q).abs().max().item<double>();
    EXPECT_LE(diff, relative * std::max(scale, 1e-12)) << p.key();
  }
}

TEST(MultiTensor, AdamWMatchesLibTorchsAdamWOverTwentyDinoSteps) {
  torch::manual_seed(3);
  auto reference = model(), ours = model(), teacher = model();
  copy_parameters(ours, reference);
  copy_parameters(teacher, reference);
  torch::optim::AdamW reference_opt(params_groups(reference), torch::optim::AdamWOptions(0.0));
  MultiTensorAdamW opt(params_groups(ours), torch::optim::AdamWOptions(0.0));
  DinoLoss loss(64, 4, 0.04, 0.04, 0, 2);
  auto initial = model();
  copy_parameters(initial, reference);
  for (int step = 0; step < 20; ++step) {
    // DINO's schedules change lr and the weight decay of group 0 every step; the last layer is frozen
    // for the first 3 steps, so its step counts differ from the others' (the per-parameter path).
    const double lr = 1e-3 * (1 + std::cos(M_PI * step / 20)), wd = 0.04 + 0.01 * step;
    set_schedule(reference_opt, lr, wd);
    set_schedule(opt, lr, wd);
    dino_gradients(reference, teacher, loss, step < 3);
    share_gradients(ours, reference);
    reference_opt.step();
    opt.step();
    EXPECT_EQ(opt.last_path(), "cpu_fused") << "a CPU step of float32 parameters is one pass per parameter";
  }
  expect_close(reference, ours, 1e-6);
  // The update moved every trained parameter (the comparison is not of two untouched models).
  auto before = initial->named_parameters();
  for (const auto& p : ours->named_parameters()) {
    if (p.value().requires_grad()) {
      EXPECT_FALSE(torch::equal(p.value(), before[p.key()])) << p.key();
    }
  }
  // Same state: step counts (17 for the frozen layer) and moments.
  for (const auto& p : reference->named_parameters()) {
    if (!p.value().requires_grad()) continue;
    ASSERT_NE(adamw_state(reference_opt, p.value()), nullptr) << p.key();
    ASSERT_NE(adamw_state(opt, ours->named_parameters()[p.key()]), nullptr) << p.key();
    const auto& a = *adamw_state(reference_opt, p.value());
    const auto& b = *adamw_state(opt, ours->named_parameters()[p.key()]);
    EXPECT_EQ(a.step(), b.step()) << p.key();
    EXPECT_EQ(a.step(), p.key().find("last_layer") != std::string::npos ? 17 : 20) << p.key();
    // Within 1e-6 of the moment's largest element: the CPU's one-pass loop and LibTorch's kernels may
    // fuse a different multiply-add (ATen's own AVX2 and baseline kernels differ so too), one rounding
    // apart, which an element-wise relative bound fails where b1 m and (1 - b1) g nearly cancel.
    for (const auto& [x, y] :
         {std::pair{a.exp_avg(), b.exp_avg()}, std::pair{a.exp_avg_sq(), b.exp_avg_sq()}}) {
      EXPECT_LE((x - y).abs().max().item<double>(), 1e-6 * x.abs().max().item<double>()) << p.key();
    }
  }
}

// The update that reads lr and weight decay from device tensors (CUDA-graph capturable: step counts and
// bias corrections on the device too) against LibTorch's AdamW over the same 20 steps, frozen last layer
// included; the host step counts advance only when told (a replayed graph runs no host code).
TEST(MultiTensor, AdamWWithTheScheduleOnTheDeviceMatchesLibTorchsAdamW) {
  torch::manual_seed(4);
  auto reference = model(), ours = model(), teacher = model();
  copy_parameters(ours, reference);
  copy_parameters(teacher, reference);
  torch::optim::AdamW reference_opt(params_groups(reference), torch::optim::AdamWOptions(0.0));
  auto groups = params_groups(ours);
  static_cast<torch::optim::AdamWOptions&>(groups[0].options()).weight_decay(1.0);  // decays
  static_cast<torch::optim::AdamWOptions&>(groups[1].options()).weight_decay(0.0);  // does not
  MultiTensorAdamW opt(groups, torch::optim::AdamWOptions(0.0));
  DinoLoss loss(64, 4, 0.04, 0.04, 0, 2);
  const auto scalar = torch::TensorOptions().dtype(torch::kFloat64);
  auto lr_t = torch::zeros({}, scalar), wd_t = torch::zeros({}, scalar);
  for (int step = 0; step < 20; ++step) {
    const double lr = 1e-3 * (1 + std::cos(M_PI * step / 20)), wd = 0.04 + 0.01 * step;
    set_schedule(reference_opt, lr, wd);
    lr_t.fill_(lr), wd_t.fill_(wd);
    dino_gradients(reference, teacher, loss, step < 3);
    share_gradients(ours, reference);
    reference_opt.step();
    opt.step_on_device(lr_t, wd_t);
    EXPECT_EQ(opt.last_path(), "device_schedule");
    if (step == 0) {
      const auto& state = *adamw_state(opt, ours->parameters().front());
      EXPECT_EQ(state.step(), 0) << "the host count waits for advance_host_steps()";
    }
    opt.advance_host_steps();
  }
  expect_close(reference, ours, 1e-6);
  for (const auto& p : reference->named_parameters()) {
    if (!p.value().requires_grad()) continue;
    const auto& a = *adamw_state(reference_opt, p.value());
    const auto& b = *adamw_state(opt, ours->named_parameters()[p.key()]);
    EXPECT_EQ(b.step(), a.step()) << p.key();
    EXPECT_EQ(b.step(), p.key().find("last_layer") != std::string::npos ? 17 : 20) << p.key();
    EXPECT_TRUE(torch::allclose(a.exp_avg(), b.exp_avg(), 1e-6, 1e-12)) << p.key();
    EXPECT_TRUE(torch::allclose(a.exp_avg_sq(), b.exp_avg_sq(), 1e-6, 1e-15)) << p.key();
  }
}

// Every trained parameter's AdamW state in `a` equals that of the same-named parameter in `b`.
void expect_same_state(torch::optim::Optimizer& a, MultiCropWrapper& ma, torch::optim::Optimizer& b,
                       MultiCropWrapper& mb, int64_t step) {
  auto pb = mb->named_parameters();
  for (const auto& p : ma->named_parameters()) {
    if (!p.value().requires_grad()) continue;
    ASSERT_NE(adamw_state(a, p.value()), nullptr) << p.key();
    ASSERT_NE(adamw_state(b, pb[p.key()]), nullptr) << p.key();
    const auto& sa = *adamw_state(a, p.value());
    const auto& sb = *adamw_state(b, pb[p.key()]);
    EXPECT_EQ(sa.step(), step) << p.key();
    EXPECT_EQ(sb.step(), step) << p.key();
    EXPECT_TRUE(torch::equal(sa.exp_avg(), sb.exp_avg())) << p.key();
    EXPECT_TRUE(torch::equal(sa.exp_avg_sq(), sb.exp_avg_sq())) << p.key();
  }
}

TEST(MultiTensor, CheckpointsMoveBetweenTheOptimizers) {
  test::TempDir d;
  torch::manual_seed(4);
  auto reference = model(), teacher = model();
  copy_parameters(teacher, reference);
  torch::optim::AdamW reference_opt(params_groups(reference), torch::optim::AdamWOptions(0.0));
  DinoLoss loss(64, 4, 0.04, 0.04, 0, 2);
  const auto step = [&](torch::optim::Optimizer& opt, MultiCropWrapper& m) {
    set_schedule(opt, 1e-3, 0.04);
    dino_gradients(m, teacher, loss, false);
    opt.step();
  };
  // A checkpoint written by the optimizer of earlier releases (torch::optim::AdamW)...
  for (int s = 0; s < 5; ++s) step(reference_opt, reference);
  save_checkpoint(d / "old.pth", reference, teacher, reference_opt, loss, {});
  // ...resumes with the multi-tensor one, moments and step counts included...
  auto resumed = model(), resumed_teacher = model();
  MultiTensorAdamW opt(params_groups(resumed), torch::optim::AdamWOptions(0.0));
  DinoLoss resumed_loss(64, 4, 0.04, 0.04, 0, 2);
  load_checkpoint(d / "old.pth", resumed, resumed_teacher, opt, resumed_loss);
  expect_close(reference, resumed, 0);
  expect_same_state(reference_opt, reference, opt, resumed, 5);
  // ...and both go on alike.
  for (int s = 0; s < 5; ++s) {
    step(reference_opt, reference);
    set_schedule(opt, 1e-3, 0.04);
    share_gradients(resumed, reference);
    opt.step();
  }
  expect_close(reference, resumed, 1e-6);
  // The multi-tensor optimizer's checkpoint is LibTorch's AdamW archive: torch::optim::AdamW reads it.
  save_checkpoint(d / "new.pth", resumed, resumed_teacher, opt, resumed_loss, {});
  auto back = model(), back_teacher = model();
  torch::optim::AdamW back_opt(params_groups(back), torch::optim::AdamWOptions(0.0));
  load_checkpoint(d / "new.pth", back, back_teacher, back_opt, resumed_loss);
  expect_same_state(opt, resumed, back_opt, back, 10);
}

// Parameters the CPU's one-pass loop does not take (float64 here; also non-contiguous ones) go through
// the list ops, which must match torch::optim::AdamW as well: two groups, one decayed, ten steps.
TEST(MultiTensor, TheListOpsPathMatchesLibTorchsAdamW) {
  torch::manual_seed(3);
  const auto make = [] {
    return std::vector<torch::Tensor>{torch::randn({7, 5}, torch::kFloat64).requires_grad_(),
                                      torch::randn({5}, torch::kFloat64).requires_grad_()};
  };
  auto ours = make(), reference = make();
  for (std::size_t i = 0; i < ours.size(); ++i) {
    torch::NoGradGuard no_grad;
    reference[i].copy_(ours[i]);
  }
  const auto groups = [](const std::vector<torch::Tensor>& p) {
    std::vector<torch::optim::OptimizerParamGroup> g;
    g.emplace_back(std::vector<torch::Tensor>{p[0]}, std::make_unique<torch::optim::AdamWOptions>(1e-2));
    g.emplace_back(std::vector<torch::Tensor>{p[1]}, std::make_unique<torch::optim::AdamWOptions>(1e-2));
    static_cast<torch::optim::AdamWOptions&>(g[0].options()).weight_decay(0.04);
    static_cast<torch::optim::AdamWOptions&>(g[1].options()).weight_decay(0.0);
    return g;
  };
  MultiTensorAdamW opt(groups(ours), torch::optim::AdamWOptions(1e-2));
  torch::optim::AdamW reference_opt(groups(reference), torch::optim::AdamWOptions(1e-2));
  for (int step = 0; step < 10; ++step) {
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const auto g = torch::randn(ours[i].sizes(), torch::kFloat64);
      ours[i].mutable_grad() = g.clone();
      reference[i].mutable_grad() = g.clone();
    }
    opt.step();
    reference_opt.step();
    EXPECT_EQ(opt.last_path(), "foreach");
  }
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_LT((ours[i] - reference[i]).abs().max().item<double>(), 1e-12) << i;
    EXPECT_GT((ours[i] - make()[i]).abs().max().item<double>(), 0) << "moved";
  }
}

TEST(MultiTensor, EmaAndClippingMatchThePerParameterReference) {
  torch::manual_seed(5);
  auto student = model(), teacher = model(), expected_teacher = model();
  copy_parameters(expected_teacher, teacher);
  {  // main_dino.py: param_k.data.mul_(m).add_((1 - m) * param_q.detach().data), parameter by parameter
    torch::NoGradGuard no_grad;
    auto t = expected_teacher->parameters(), s = student->parameters();
    for (std::size_t i = 0; i < t.size(); ++i) t[i].mul_(0.996).add_((1 - 0.996) * s[i].detach());
  }
  auto on_device = model();  // the momentum read from a tensor (what a CUDA graph of the step replays)
  copy_parameters(on_device, teacher);
  ema_update(*teacher, *student, 0.996);
  expect_close(expected_teacher, teacher, 1e-7);
  ema_update(*on_device, *student, torch::full({}, 0.996, torch::kFloat64));
  expect_close(expected_teacher, on_device, 1e-6);
  EXPECT_FALSE(torch::equal(teacher->backbone->cls_token, student->backbone->cls_token));
  EXPECT_THROW(ema_update(*teacher, *student->backbone, 0.9), std::invalid_argument);

  DinoLoss loss(64, 4, 0.04, 0.04, 0, 2);
  dino_gradients(student, teacher, loss, true);
  std::vector<double> expected_norms;
  for (auto& p : student->parameters())
    if (p.grad().defined()) expected_norms.push_back(p.grad().norm(2).item<double>());
  // The clip at the median norm: some gradients are scaled, some are not.
  std::vector<double> sorted = expected_norms;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  const double clip = sorted[sorted.size() / 2];
  auto reference = model();
  share_gradients(reference, student);
  for (auto& p : reference->parameters()) {  // utils.clip_gradients
    if (!p.grad().defined()) continue;
    const auto norm = p.grad().norm(2);
    const double coef = clip / (norm.item<double>() + 1e-6);
    if (coef < 1) p.mutable_grad().mul_(coef);
  }
  const auto norms = clip_gradients(*student, clip);
  ASSERT_EQ(norms.numel(), static_cast<int64_t>(expected_norms.size()));
  int clipped = 0;
  for (std::size_t i = 0; i < expected_norms.size(); ++i) {
    EXPECT_NEAR(norms[static_cast<int64_t>(i)].item<double>(), expected_norms[i], 1e-6 * expected_norms[i]);
    clipped += expected_norms[i] > clip;
  }
  EXPECT_GT(clipped, 0) << "some gradients are above the clip";
  EXPECT_LT(clipped, static_cast<int>(expected_norms.size())) << "and some below";
  auto s = student->parameters(), r = reference->parameters();
  for (std::size_t i = 0; i < s.size(); ++i) {
    ASSERT_EQ(s[i].grad().defined(), r[i].grad().defined());
    if (s[i].grad().defined()) {
      EXPECT_TRUE(torch::allclose(s[i].grad(), r[i].grad(), 1e-6, 1e-12)) << i;
    }
  }
  EXPECT_EQ(clip_gradients(*torch::nn::Linear(2, 2), 1.0).numel(), 0) << "no gradients: no norms";
}

TEST(MultiTensor, ZeroGradZeroesEveryGradientOnce) {
  auto m = model();
  MultiTensorAdamW opt(params_groups(m), torch::optim::AdamWOptions(1e-3));
  for (auto& p : m->parameters()) p.mutable_grad() = torch::ones_like(p);
  m->head->weight_v.mutable_grad() = torch::Tensor();
  opt.zero_grad();
  EXPECT_TRUE(torch::equal(m->head->weight_g.grad(), torch::ones_like(m->head->weight_g)))
      << "a parameter the optimizer does not train (the frozen norm) is left alone";
  for (const auto& p : m->named_parameters()) {
    if (!p.value().requires_grad()) continue;
    if (p.value().grad().defined()) {
      EXPECT_EQ(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
    }
  }
  EXPECT_FALSE(m->head->weight_v.grad().defined()) << "an undefined gradient stays undefined";
}

TEST(MultiTensor, AmsgradIsRefused) {
  auto m = model();
  MultiTensorAdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3).amsgrad(true));
  for (auto& p : m->parameters()) p.mutable_grad() = torch::ones_like(p);
  EXPECT_THROW(opt.step(), std::invalid_argument);
}

// In float64, which the CPU's float32 attention (cpu_layers.hpp, tested in test_cpu_layers.cpp) does not
// take: LibTorch's two forms against each other.
TEST(MultiTensor, ScaledDotProductAttentionMatchesTheWrittenOutForm) {
  torch::manual_seed(6);
  Attention fused(192, 3, true), written(192, 3, false);
  fused->to(torch::kFloat64), written->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;
    auto f = fused->parameters(), w = written->parameters();
    for (std::size_t i = 0; i < f.size(); ++i) w[i].copy_(f[i]);
  }
  const auto x = torch::randn({3, 17, 192}, torch::kFloat64);
  const auto a = fused(x), b = written(x);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-6)) << (a - b).abs().max();
  (a * a).sum().backward();
  (b * b).sum().backward();
  EXPECT_TRUE(torch::allclose(fused->qkv->weight.grad(), written->qkv->weight.grad(), 1e-4, 1e-6));
  // Whole backbones: the CLS token of both forms, global and (interpolated) local crop sizes.
  torch::manual_seed(7);
  auto vf = model(true), vw = model(false);
  vf->to(torch::kFloat64), vw->to(torch::kFloat64);
  copy_parameters(vw, vf);
  for (const int size : {28, 16}) {
    const auto images = torch::randn({2, 1, size, size}, torch::kFloat64);
    EXPECT_TRUE(torch::allclose(vf->backbone(images), vw->backbone(images), 1e-5, 1e-5)) << size;
  }
}

}  // namespace
}  // namespace pcdino::train
