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

// Crops of the whole image (area fraction 1: the central crop, all of a square image), global ones of
// `global_size` px, `locals` local ones of `global_size` / 2.
MultiCropOptions whole_image_crops(int global_size, int locals) {
  MultiCropOptions o;
  o.global_crops_size = global_size;
  o.local_crops_size = global_size / 2;
  o.local_crops_number = locals;
  o.global_crops_scale = {1.0, 1.0};
  return o;
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

TEST(Augment, CropsInPlaceAreTheCropsAndNeedOneBufferEach) {
  MultiCropOptions o = whole_image_crops(20, 4);
  o.global_crops_scale = {0.4, 1.0};
  const Image img = ramp_image(3, 30, 26);
  const auto crops = multi_crop(img, o, 9);
  EXPECT_EQ(multi_crop_sizes(o), (std::vector<int>{20, 20, 10, 10, 10, 10}));
  std::vector<std::vector<float>> memory;
  std::vector<float*> buffers;
  for (int size : multi_crop_sizes(o)) memory.emplace_back(std::size_t(3 * size * size), -7.0F);
  for (auto& m : memory) buffers.push_back(m.data());
  multi_crop_into(img, o, 9, buffers);
  for (std::size_t k = 0; k < crops.size(); ++k) EXPECT_EQ(memory[k], crops[k].data) << "crop " << k;
  buffers.pop_back();
  EXPECT_THROW(multi_crop_into(img, o, 9, buffers), std::invalid_argument);
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
  MultiCropOptions o = whole_image_crops(8, 1);
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

// Total variation along rows over the sum of the values: 2 (W - 1) / W for a 0/a checkerboard whatever a
// (the brightness factor), less once blurred. Flips keep it.
double roughness(const Image& img) {
  double tv = 0, sum = 0;
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const float v = img.data[static_cast<std::size_t>(y * img.width + x)];
      sum += v;
      if (x + 1 < img.width) tv += std::abs(v - img.data[static_cast<std::size_t>(y * img.width + x + 1)]);
    }
  }
  return tv / sum;
}

Image checkerboard(int size) {
  Image img;
  img.channels = 1;
  img.height = img.width = size;
  img.data.resize(static_cast<std::size_t>(size) * size);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      img.data[static_cast<std::size_t>(y * size + x)] = (x + y) % 2 ? 1.0F : 0.0F;
  return img;
}

// The first global crop is always blurred. Its whole image (scale 1) at the image's own size: sigma
// U(0.1, 1.5) x 28/224 leaves a 28-px checkerboard as it is, the reference's pixel sigma smooths it.
TEST(Augment, BlurScalesWithTheCropSize) {
  MultiCropOptions o = whole_image_crops(28, 0);
  const Image board = checkerboard(28);
  const double sharp = 2.0 * 27 / 28;
  int smoothed = 0;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    o.scale_augmentation_to_crop = true;
    EXPECT_NEAR(roughness(multi_crop(board, o, seed)[0]), sharp, 1e-5) << "seed " << seed;
    o.scale_augmentation_to_crop = false;
    if (roughness(multi_crop(board, o, seed)[0]) < 0.9 * sharp) ++smoothed;
  }
  EXPECT_GE(smoothed, 7);  // sigma < ~0.3 px (about 1 draw in 7) hardly blurs

  // At the reference's crop sizes the rule changes nothing.
  o.global_crops_size = kReferenceGlobalCropSize;
  o.local_crops_size = kReferenceLocalCropSize;
  o.local_crops_number = 1;
  o.global_crops_scale = {0.4, 1.0};
  const Image big = ramp_image(1, 240, 240);
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    o.scale_augmentation_to_crop = true;
    const auto scaled = multi_crop(big, o, seed);
    o.scale_augmentation_to_crop = false;
    const auto reference = multi_crop(big, o, seed);
    for (std::size_t i = 0; i < scaled.size(); ++i) EXPECT_EQ(scaled[i].data, reference[i].data) << i;
  }
}

// Top half bright, bottom half dark: only a vertical flip puts the bright rows at the bottom.
TEST(Augment, VerticalFlipOnlyWhenAsked) {
  MultiCropOptions o = whole_image_crops(16, 0);
  Image img = checkerboard(16);
  for (int i = 0; i < 16 * 16; ++i) img.data[static_cast<std::size_t>(i)] = i < 8 * 16 ? 1.0F : 0.0F;
  const auto flipped = [&](std::uint64_t seed) {
    const Image crop = multi_crop(img, o, seed)[0];  // the first global crop: never solarised
    double top = 0, bottom = 0;
    for (int i = 0; i < 16 * 16; ++i) (i < 8 * 16 ? top : bottom) += crop.data[static_cast<std::size_t>(i)];
    return bottom > top;
  };
  int with = 0, without = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    o.vflip = true;
    with += flipped(seed) ? 1 : 0;
    o.vflip = false;
    without += flipped(seed) ? 1 : 0;
  }
  EXPECT_EQ(without, 0);
  EXPECT_GE(with, 8);  // p 0.5 of 40 draws
  EXPECT_LE(with, 32);
}

}  // namespace
}  // namespace pcdino::train

namespace pcdino::train {
namespace {

Image rgb_image(const std::vector<std::array<float, 3>>& pixels) {
  Image img;
  img.channels = 3;
  img.height = 1;
  img.width = static_cast<int>(pixels.size());
  img.data.resize(3 * pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    for (std::size_t c = 0; c < 3; ++c) img.data[c * pixels.size() + i] = pixels[i][c];
  }
  return img;
}

std::array<float, 3> pixel(const Image& img, std::size_t i) {
  const std::size_t n = static_cast<std::size_t>(img.width);
  return {img.data[i], img.data[n + i], img.data[2 * n + i]};
}

void expect_pixel(const Image& img, std::size_t i, std::array<double, 3> expected, double tol = 1e-5) {
  const auto p = pixel(img, i);
  for (std::size_t c = 0; c < 3; ++c)
    EXPECT_NEAR(p[c], expected[c], tol) << "pixel " << i << " channel " << c;
}

TEST(ColorJitter, BrightnessContrastSaturationAsTorchvisionsFormulas) {
  Image a = rgb_image({{0.2F, 0.5F, 0.8F}});
  adjust_brightness(a, 1.5);
  expect_pixel(a, 0, {0.3, 0.75, 1.0});  // 1.2 clamped
  // Contrast blends with the mean of the grayscale image: white (gray 0.9999) and black (0).
  Image b = rgb_image({{1, 1, 1}, {0, 0, 0}});
  adjust_contrast(b, 0.5);
  const double mean = (0.2989 + 0.587 + 0.114) / 2;
  expect_pixel(b, 0, {0.5 + 0.5 * mean, 0.5 + 0.5 * mean, 0.5 + 0.5 * mean});
  expect_pixel(b, 1, {0.5 * mean, 0.5 * mean, 0.5 * mean});
  // Saturation blends each pixel with its own gray: factor 2 pushes away from it.
  Image c = rgb_image({{0.2F, 0.5F, 0.8F}});
  adjust_saturation(c, 2.0);
  const double gray = 0.2989 * 0.2 + 0.587 * 0.5 + 0.114 * 0.8;
  expect_pixel(c, 0, {0.0, 1.0 - gray, 1.0});
  Image d = rgb_image({{0.2F, 0.5F, 0.8F}});
  adjust_saturation(d, 0.0);
  expect_pixel(d, 0, {gray, gray, gray});
}

TEST(ColorJitter, HueRotatesThePrimariesAndKeepsGrays) {
  Image a = rgb_image({{1, 0, 0}, {0.5F, 0.5F, 0.5F}, {0.2F, 0.5F, 0.8F}});
  const Image before = a;
  adjust_hue(a, 0.0);
  for (std::size_t i = 0; i < 3; ++i)
    expect_pixel(a, i, {pixel(before, i)[0], pixel(before, i)[1], pixel(before, i)[2]});
  adjust_hue(a, 1.0 / 3.0);
  expect_pixel(a, 0, {0, 1, 0});        // red -> green
  expect_pixel(a, 1, {0.5, 0.5, 0.5});  // no hue to turn
  adjust_hue(a, 1.0 / 3.0);
  expect_pixel(a, 0, {0, 0, 1});  // -> blue
  adjust_hue(a, 1.0 / 3.0);
  expect_pixel(a, 2, {0.2, 0.5, 0.8}, 1e-4);  // a full turn brings any colour back
  // torchvision 0.14's F.adjust_hue(tensor [[[0.2]], [[0.5]], [[0.8]]], 0.07) (Debian's
  // python3-torchvision) gives [0.2, 0.24800025, 0.8].
  Image b = rgb_image({{0.2F, 0.5F, 0.8F}});
  adjust_hue(b, 0.07);
  expect_pixel(b, 0, {0.2, 0.24800025, 0.8});
}

TEST(ColorJitter, GrayscaleAndRgbPipeline) {
  Image a = rgb_image({{0.2F, 0.5F, 0.8F}});
  to_grayscale(a);
  const double gray = 0.2989 * 0.2 + 0.587 * 0.5 + 0.114 * 0.8;
  expect_pixel(a, 0, {gray, gray, gray});

  Image one;
  one.channels = 1;
  one.height = one.width = 4;
  one.data.assign(16, 0.5F);
  EXPECT_THROW(adjust_hue(one, 0.1), std::invalid_argument);
  MultiCropOptions o;
  o.rgb = true;
  o.global_crops_size = 8;
  o.local_crops_size = 4;
  o.local_crops_number = 2;
  EXPECT_THROW(multi_crop(one, o, 1), std::invalid_argument);

  // A colourful 16x16 image: crops keep 3 channels in [0, 1]; over many seeds some crops turn gray
  // (p 0.2) and most change colour (p 0.8), as DINO's pipeline does.
  Image rgb;
  rgb.channels = 3;
  rgb.height = rgb.width = 16;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 256; ++i) rgb.data.push_back(static_cast<float>((i * (c + 1) * 37) % 256) / 255.0F);
  }
  int gray_crops = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const auto crops = multi_crop(rgb, o, seed);
    ASSERT_EQ(crops.size(), 4U);
    for (const auto& crop : crops) {
      ASSERT_EQ(crop.channels, 3);
      for (float v : crop.data) ASSERT_TRUE(v >= 0.0F && v <= 1.0F) << v;
    }
    const auto& local = crops[2];
    const std::size_t n = 16;
    bool all_gray = true;
    for (std::size_t i = 0; i < n; ++i)
      all_gray = all_gray && local.data[i] == local.data[n + i] && local.data[i] == local.data[2 * n + i];
    gray_crops += all_gray;
  }
  EXPECT_GT(gray_crops, 20);  // about 40 of 200 expected
  EXPECT_LT(gray_crops, 70);
}

}  // namespace
}  // namespace pcdino::train
