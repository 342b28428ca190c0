// Unit tests of device selection, the autocast type choice and float16 loss scaling (what can be checked
// without a GPU; the CUDA path itself runs on GPU machines, bench/RESULTS.md).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "pcdino/core/error.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/dino.hpp"
#include "pcdino/train/multi_tensor.hpp"

namespace pcdino::train {
namespace {

TEST(Device, SelectionAndErrorsNameTheOption) {
  EXPECT_TRUE(select_device("cpu", 3).is_cpu());
  if (!torch::cuda::is_available()) {
    EXPECT_TRUE(select_device("auto", 0).is_cpu());
    try {
      select_device("cuda", 0);
      FAIL() << "cuda without a GPU must be an error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
    }
  } else {
    const auto d = select_device("cuda", 1);
    EXPECT_EQ(d.index(), 1 % static_cast<int>(torch::cuda::device_count()));
  }
  EXPECT_THROW(select_device("gpu", 0), ConfigError);
  EXPECT_THROW(select_device("cuda:x", 0), ConfigError);
}

TEST(Device, AutocastTypeOnlyOnGpus) {
  EXPECT_FALSE(autocast_dtype(torch::Device(torch::kCPU), "auto").has_value()) << "CPU training stays fp32";
  const torch::Device gpu(torch::kCUDA, 0);  // no GPU needed: forced types do not ask the device
  EXPECT_EQ(autocast_dtype(gpu, "bfloat16"), torch::kBFloat16);
  EXPECT_EQ(autocast_dtype(gpu, "float16"), torch::kHalf);
  EXPECT_THROW(autocast_dtype(gpu, "fp8"), ConfigError);
}

TEST(GradScaler, ScalesUnscalesSkipsOnOverflowAndAdapts) {
  GradScaler off(false);
  const auto loss = torch::tensor(2.0);
  EXPECT_EQ(off.scale(loss).item<double>(), 2.0);

  GradScaler scaler(true, 1024.0, 2.0, 0.5, /*growth_interval=*/3);
  EXPECT_EQ(scaler.scale(loss).item<double>(), 2048.0);
  auto w = torch::ones({4}, torch::requires_grad());
  (scaler.scale((w * torch::tensor({1.0F, 2.0F, 3.0F, 4.0F})).sum())).backward();
  ASSERT_TRUE(scaler.unscale({w}));
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}))) << "powers of two: exact";

  w.mutable_grad() = torch::tensor({1.0F, std::numeric_limits<float>::infinity(), 0.0F, 0.0F});
  EXPECT_FALSE(scaler.unscale({w})) << "an overflowed gradient skips the step";
  scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 512.0);
  for (int i = 0; i < 3; ++i) scaler.update(false);
  EXPECT_EQ(scaler.current_scale(), 1024.0) << "grows after growth_interval good steps";
}

TEST(Training, ClippingScalesOnlyLargeGradientsAndReturnsNorms) {
  torch::nn::Linear layer(2, 2);
  layer->weight.mutable_grad() = torch::tensor({{3.0F, 0.0F}, {0.0F, 4.0F}});  // norm 5
  layer->bias.mutable_grad() = torch::tensor({0.3F, 0.4F});                    // norm 0.5
  const auto norms = clip_gradients(*layer, 1.0);
  ASSERT_EQ(norms.numel(), 2);
  EXPECT_NEAR(norms[0].item<double>(), 5.0, 1e-6);
  EXPECT_NEAR(norms[1].item<double>(), 0.5, 1e-6);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(layer->weight.grad()[1][1].item<double>(), 4.0 * coef, 1e-6);
  EXPECT_TRUE(torch::equal(layer->bias.grad(), torch::tensor({0.3F, 0.4F}))) << "below the clip: untouched";
}

}  // namespace
}  // namespace pcdino::train
