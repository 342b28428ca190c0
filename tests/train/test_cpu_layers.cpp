// The CPU's float32 layers (train/include/pcdino/train/cpu_layers.hpp, issue #38): the linear layers
// through oneDNN's matmul against LibTorch's at::linear (outputs and all three gradients at the ViT's and
// the DINO head's shapes, the path each call takes, autocast left to LibTorch), and the attention from
// the fused qkv against the reference's written-out form in float64 (output and gradient).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "pcdino/train/cpu_layers.hpp"
#include "pcdino/train/device.hpp"

namespace pcdino::train {
namespace {

struct Case {
  std::vector<int64_t> x_shape;  // [..., in]
  int64_t out;
  bool bias;
  bool transposed_input;  // x made non-contiguous (a transposed view), as after attention's transpose
};

class CpuLinear : public ::testing::TestWithParam<Case> {};

TEST_P(CpuLinear, MatchesLibTorchsLinearAndItsGradients) {
  const auto& c = GetParam();
  torch::manual_seed(3);
  const int64_t in = c.x_shape.back();
  auto x = torch::randn(c.x_shape);
  if (c.transposed_input) x = x.transpose(0, 1).contiguous().transpose(0, 1);
  ASSERT_EQ(x.is_contiguous(), !c.transposed_input || c.x_shape[0] == 1 || c.x_shape[1] == 1);
  const auto w = torch::randn({c.out, in}) * 0.05;
  const auto b = c.bias ? torch::randn({c.out}) : torch::Tensor();

  auto run = [&](bool ours) {
    auto xr = x.detach().clone().requires_grad_(true);
    auto wr = w.detach().clone().requires_grad_(true);
    auto br = c.bias ? b.detach().clone().requires_grad_(true) : torch::Tensor();
    auto y = ours ? linear(xr, wr, br) : at::linear(xr, wr, br);
    const auto upstream = torch::linspace(-1, 1, y.numel()).reshape(y.sizes());
    (y * upstream).sum().backward();
    return std::vector<torch::Tensor>{y.detach(), xr.grad(), wr.grad(),
                                      c.bias ? br.grad() : torch::zeros({1})};
  };
  const auto ours = run(true), reference = run(false);
  const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
  for (std::size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i].sizes(), reference[i].sizes()) << names[i];
    const double scale = reference[i].abs().max().item<double>();
    EXPECT_LE((ours[i] - reference[i]).abs().max().item<double>(), 1e-5 * std::max(scale, 1.0)) << names[i];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuLinear,
    ::testing::Values(Case{{8, 17, 192}, 576, true, false},  // qkv of 8 global crops (17 tokens)
                      Case{{48, 5, 192}, 768, true, true},   // fc1 of 48 local crops, input non-contiguous
                      Case{{272, 768}, 192, true, false},    // fc2, 2-D
                      Case{{64, 2048}, 256, true, false},    // the head's bottleneck
                      Case{{64, 256}, 1024, false, false},   // the head's last layer, no bias
                      Case{{1, 3, 7}, 5, true, false}));     // odd sizes

TEST(CpuLinearPath, TakesOneDnnForFloat32AndLeavesAutocastToLibTorch) {
  auto x = torch::randn({4, 6, 192}, torch::requires_grad());
  auto w = torch::randn({576, 192}, torch::requires_grad());
  auto b = torch::randn({576}, torch::requires_grad());
  const auto y = linear(x, w, b);
  ASSERT_TRUE(y.grad_fn());
  // The output is a view of the matmul's [M, N] result: the node below the view is the matmul's.
  const auto& edges = y.grad_fn()->next_edges();
  ASSERT_FALSE(edges.empty());
  const std::string node = y.grad_fn()->name() + " <- " + edges[0].function->name();
  if (cpu_linear_available()) {
    EXPECT_NE(node.find("LinearFunction"), std::string::npos) << node;
  } else {
    EXPECT_EQ(node.find("LinearFunction"), std::string::npos) << node;
  }
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{4, 6, 576}));

  // float64 and autocast go to at::linear: the same dtype as LibTorch gives.
  EXPECT_EQ(linear(x.to(torch::kFloat64), w.to(torch::kFloat64), b.to(torch::kFloat64)).scalar_type(),
            torch::kFloat64);
  torch::Tensor z, reference;
  {
    const AutocastGuard bfloat16(at::kBFloat16, c10::DeviceType::CPU);
    z = linear(x, w, b);
    reference = at::linear(x, w, b);
  }
  EXPECT_EQ(z.scalar_type(), reference.scalar_type());
  EXPECT_EQ(z.scalar_type(), torch::kBFloat16);
}

// The written-out reference (vision_transformer.py Attention.forward between qkv and proj), float64.
torch::Tensor written_attention(const torch::Tensor& qkv, int64_t heads, double scale) {
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  const auto t = qkv.reshape({B, N, 3, heads, C / heads}).permute({2, 0, 3, 1, 4});
  const auto attn = (t[0].matmul(t[1].transpose(-2, -1)) * scale).softmax(-1);
  return attn.matmul(t[2]).transpose(1, 2).reshape({B, N, C});
}

struct AttentionCase {
  int64_t batch, tokens, channels, heads;
};

class CpuAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuAttention, MatchesTheWrittenOutFormAndItsGradient) {
  const auto& c = GetParam();
  torch::manual_seed(5);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.channels / c.heads));
  const auto qkv = torch::randn({c.batch, c.tokens, 3 * c.channels}) * 2;  // peaked and flat rows alike
  const auto upstream = torch::randn({c.batch, c.tokens, c.channels});

  auto ours_in = qkv.clone().requires_grad_(true);
  ASSERT_TRUE(cpu_attention_applies(ours_in));
  const auto ours = cpu_attention(ours_in, c.heads, scale);
  (ours * upstream).sum().backward();

  auto ref_in = qkv.to(torch::kFloat64).requires_grad_(true);
  const auto reference = written_attention(ref_in, c.heads, scale);
  (reference * upstream.to(torch::kFloat64)).sum().backward();

  ASSERT_EQ(ours.sizes(), reference.sizes());
  EXPECT_LE((ours.to(torch::kFloat64) - reference).abs().max().item<double>(), 2e-5);
  EXPECT_LE((ours_in.grad().to(torch::kFloat64) - ref_in.grad()).abs().max().item<double>(), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuAttention,
                         ::testing::Values(AttentionCase{8, 17, 192, 3},  // the demo's global crops
                                           AttentionCase{48, 5, 192, 3},  // its local crops
                                           AttentionCase{2, 65, 384, 6},  // vit_small, 64 patches
                                           AttentionCase{3, 1, 60, 3},    // one token: softmax of one
                                           AttentionCase{2, 7, 60, 3}));  // head_dim 20: not whole vectors

TEST(CpuAttentionPath, RefusesWhatItDoesNotTake) {
  EXPECT_FALSE(cpu_attention_applies(torch::randn({2, 5, 12}, torch::kFloat64)));
  EXPECT_FALSE(cpu_attention_applies(torch::randn({2, 5, 12}).to(torch::kBFloat16)));
  EXPECT_FALSE(cpu_attention_applies(torch::randn({2, 5, 13})));  // not 3C
  EXPECT_FALSE(cpu_attention_applies(torch::randn({10, 12})));
  EXPECT_THROW(cpu_attention(torch::randn({2, 5, 12}), 3, 1.0), c10::Error);  // 4 channels, 3 heads
  bool under_autocast = false;
  {  // float32 under autocast: LibTorch's ops, as autocast chooses
    const AutocastGuard bfloat16(at::kBFloat16, c10::DeviceType::CPU);
    under_autocast = cpu_attention_applies(torch::randn({2, 5, 12}));
  }
  EXPECT_FALSE(under_autocast);
}

// Under CPU bfloat16 autocast few tokens go through the float32 loops (autocast paused, then on again):
// the written-out form of the same bfloat16 inputs, its gradient back in bfloat16; more tokens or rows,
// autocast off or PCDINO_CPU_LAYERS' float32 input stay with the caller.
TEST(CpuAttentionPath, FewTokensUnderBfloatAutocastAreWidened) {
  torch::manual_seed(6);
  const int64_t heads = 3;
  const double scale = 1.0 / std::sqrt(64.0);
  const auto qkv = (torch::randn({4, 17, 3 * 192}) * 2).to(torch::kBFloat16);
  const auto upstream = torch::randn({4, 17, 192});
  auto ours_in = qkv.clone().requires_grad_(true);
  torch::Tensor ours;
  bool still_on = false, many_tokens = true, float_input = true, many_rows = true;
  {
    const AutocastGuard bfloat16(at::kBFloat16, c10::DeviceType::CPU);
    ours = cpu_attention_widened(ours_in, heads, scale);
    still_on = autocast_enabled(c10::DeviceType::CPU);
    many_tokens =
        cpu_attention_widened(torch::randn({1, kWidenedAttentionTokens + 1, 36}).to(torch::kBFloat16), 3, 1.0)
            .defined();
    float_input = cpu_attention_widened(torch::randn({1, 5, 36}), 3, 1.0).defined();
    many_rows = cpu_attention_widened(
                    torch::randn({kWidenedAttentionRows / 16 + 1, 16, 36}).to(torch::kBFloat16), 3, 1.0)
                    .defined();
  }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU)) << "the guard ended autocast";
  EXPECT_TRUE(still_on) << "autocast is on again after the widened attention";
  EXPECT_FALSE(many_tokens);
  EXPECT_FALSE(float_input);
  EXPECT_FALSE(many_rows) << "more than kWidenedAttentionRows rows stay with LibTorch's products";
  EXPECT_FALSE(cpu_attention_widened(qkv, heads, scale).defined()) << "autocast off";
  ASSERT_TRUE(ours.defined());
  EXPECT_EQ(ours.scalar_type(), torch::kFloat);
  (ours * upstream).sum().backward();
  auto ref_in = qkv.to(torch::kFloat64).requires_grad_(true);
  const auto reference = written_attention(ref_in, heads, scale);
  (reference * upstream.to(torch::kFloat64)).sum().backward();
  EXPECT_LE((ours.to(torch::kFloat64) - reference).abs().max().item<double>(), 2e-5);
  EXPECT_EQ(ours_in.grad().scalar_type(), torch::kBFloat16);
  // The gradient is rounded to bfloat16 (8 bits of mantissa) on its way back.
  const auto grad_error = (ours_in.grad().to(torch::kFloat64) - ref_in.grad()).abs().max().item<double>();
  EXPECT_LE(grad_error, 1e-2 * ref_in.grad().abs().max().item<double>());
}

}  // namespace
}  // namespace pcdino::train
