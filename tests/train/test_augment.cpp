// Multi-crop augmentation: crop geometry as torchvision draws it, the pixel operations, determinism.
#include <gtest/gtest.h>

#include <numeric>

#include "pcdino/train/augment.hpp"

namespace pcdino::train {
namespace {

Image ramp_image(int channels, int h, int w) {
  Image img;
  img.channels = channels;
  img.height = h;
  img.width = w;
  img.data.resize(static_cast<std::size_t>(channels) * h * w);
  for (std::size_t i = 0; i < img.data.size(); ++i) img.data[i] = static_cast<float>(i % 97) / 96.0f;
  return img;
}

TEST(Augment, CropBoxesRespectScaleRatioAndBounds) {
  std::mt19937 rng(1);
  int fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = random_resized_crop_box(50, 50, {0.05, 0.4}, {3.0 / 4, 4.0 / 3}, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 50);
    ASSERT_LE(b.left + b.width, 50);
    const double fraction = static_cast<double>(b.height) * b.width / 2500.0;
    if (b.height == 50 && b.width == 50) ++fallbacks;
    // Rounding of w and h moves the area a little around the drawn fraction.
    EXPECT_GE(fraction, 0.05 * 0.8) << i;
    EXPECT_LE(fraction, 0.4 * 1.2) << i;
    const double ratio = static_cast<double>(b.width) / b.height;
    EXPECT_GE(ratio, 0.75 * 0.85);
    EXPECT_LE(ratio, 4.0 / 3 * 1.15);
  }
  EXPECT_EQ(fallbacks, 0) << "local crops always fit a 50x50 image";
  // An impossible request falls back to the central crop with the ratio clamped.
  const CropBox wide = random_resized_crop_box(10, 100, {1.0, 1.0}, {3.0 / 4, 4.0 / 3}, rng);
  EXPECT_EQ(wide.height, 10);
  EXPECT_EQ(wide.width, 13);
  EXPECT_EQ(wide.left, (100 - 13) / 2);
}

TEST(Augment, CropsHaveTheConfiguredSizesAndRange) {
  MultiCropOptions o;
  o.global_crops_size = 28;
  o.local_crops_size = 16;
  o.local_crops_number = 6;
  const auto crops = multi_crop(ramp_image(5, 50, 50), o, 42);
  ASSERT_EQ(crops.size(), 8u);
  for (std::size_t i = 0; i < crops.size(); ++i) {
    const int size = i < 2 ? 28 : 16;
    EXPECT_EQ(crops[i].channels, 5);
    EXPECT_EQ(crops[i].height, size);
    EXPECT_EQ(crops[i].width, size);
    for (float v : crops[i].data) {
      ASSERT_GE(v, -0.01f) << "crop " << i;  // bicubic may overshoot slightly before the clamp
      ASSERT_LE(v, 1.01f) << "crop " << i;
    }
  }
}

TEST(Augment, NormalisationUsesTheMeanStdFile) {
  MultiCropOptions o;
  o.global_crops_size = 8;
  o.local_crops_size = 4;
  o.local_crops_number = 1;
  o.global_crops_scale = {1.0, 1.0};
  Image flat = ramp_image(2, 8, 8);
  std::fill(flat.data.begin(), flat.data.begin() + 64, 0.0f);  // channel 0 all zero: every op keeps it zero
  o.mean = {0.25, 0.0};
  o.std = {0.5, 1.0};
  const auto crops = multi_crop(flat, o, 7);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(crops[0].data[i], (0.0f - 0.25f) / 0.5f);
  o.mean = {0.1};
  EXPECT_THROW(multi_crop(flat, o, 7), std::invalid_argument);
}

TEST(Augment, SameSeedSameCropsOtherSeedOtherCrops) {
  MultiCropOptions o;
  o.global_crops_size = 28;
  o.local_crops_size = 16;
  o.local_crops_number = 2;
  const Image img = ramp_image(3, 50, 50);
  const auto a = multi_crop(img, o, sample_seed(40, 3, 17));
  const auto b = multi_crop(img, o, sample_seed(40, 3, 17));
  const auto c = multi_crop(img, o, sample_seed(40, 4, 17));
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].data, b[i].data);
  EXPECT_NE(a[0].data, c[0].data);
  EXPECT_NE(sample_seed(40, 3, 17), sample_seed(40, 3, 18));
  EXPECT_NE(sample_seed(40, 3, 17), sample_seed(41, 3, 17));
}

}  // namespace
}  // namespace pcdino::train
