#include "pcdino/train/augment.hpp"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <stdexcept>

namespace pcdino::train {

namespace {

double uniform(std::mt19937& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}
bool chance(std::mt19937& rng, double p) {
  return uniform(rng, 0.0, 1.0) < p;
}

// One channel plane as an OpenCV matrix sharing the image's memory.
cv::Mat plane(Image& img, int c) {
  return cv::Mat(img.height, img.width, CV_32FC1,
                 img.data.data() + static_cast<std::size_t>(c) * img.height * img.width);
}

Image crop_and_resize(const Image& src, const CropBox& box, int size) {
  Image out;
  out.channels = src.channels;
  out.height = out.width = size;
  out.data.resize(static_cast<std::size_t>(src.channels) * size * size);
  for (int c = 0; c < src.channels; ++c) {
    const cv::Mat full(
        src.height, src.width, CV_32FC1,
        const_cast<float*>(src.data.data()) + static_cast<std::size_t>(c) * src.height * src.width);
    cv::Mat dst = plane(out, c);
    cv::resize(full(cv::Rect(box.left, box.top, box.width, box.height)), dst, cv::Size(size, size), 0, 0,
               cv::INTER_CUBIC);
  }
  return out;
}

void augment(Image& img, double blur_p, double solarize_p, std::mt19937& rng) {
  const bool hflip = chance(rng, 0.5), vflip = chance(rng, 0.5);
  for (int c = 0; c < img.channels; ++c) {
    cv::Mat p = plane(img, c);
    if (hflip) cv::flip(p, p, 1);
    if (vflip) cv::flip(p, p, 0);
  }
  if (chance(rng, 0.8)) {
    for (int c = 0; c < img.channels; ++c) {
      const double factor = uniform(rng, 0.5, 1.25);  // one factor per channel
      cv::Mat p = plane(img, c);
      p *= factor;
      cv::min(p, 1.0, p);
      cv::max(p, 0.0, p);
    }
  }
  if (chance(rng, blur_p)) {
    const double sigma = uniform(rng, 0.1, 1.5);
    for (int c = 0; c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::GaussianBlur(p, p, cv::Size(5, 5), sigma, sigma, cv::BORDER_REFLECT_101);
    }
  }
  if (chance(rng, solarize_p)) {
    for (float& v : img.data) v = v > 0.5f ? 1.0f - v : v;
  }
}

void normalize(Image& img, const MultiCropOptions& o) {
  if (o.mean.empty()) return;
  const std::size_t plane_size = static_cast<std::size_t>(img.height) * img.width;
  for (int c = 0; c < img.channels; ++c) {
    const auto m = static_cast<float>(o.mean[static_cast<std::size_t>(c)]);
    const auto s = static_cast<float>(o.std[static_cast<std::size_t>(c)]);
    float* p = img.data.data() + static_cast<std::size_t>(c) * plane_size;
    for (std::size_t i = 0; i < plane_size; ++i) p[i] = (p[i] - m) / s;
  }
}

}  // namespace

CropBox random_resized_crop_box(int height, int width, std::array<double, 2> scale,
                                std::array<double, 2> ratio, std::mt19937& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * uniform(rng, scale[0], scale[1]);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int top = std::uniform_int_distribution<int>(0, height - h)(rng);
      const int left = std::uniform_int_distribution<int>(0, width - w)(rng);
      return {top, left, h, w};
    }
  }
  // Fallback: the central crop, its ratio clamped into `ratio`.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio[0]) {
    h = static_cast<int>(std::lround(w / ratio[0]));
  } else if (in_ratio > ratio[1]) {
    w = static_cast<int>(std::lround(h * ratio[1]));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::uint64_t sample_seed(std::uint64_t seed, int epoch, std::uint64_t index) {
  // splitmix64 over the three numbers: well mixed, and cheap.
  std::uint64_t z =
      seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(epoch) * 0xBF58476D1CE4E5B9ULL + index;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<Image> multi_crop(const Image& image, const MultiCropOptions& o, std::uint64_t seed) {
  if (!o.mean.empty() &&
      (o.mean.size() != static_cast<std::size_t>(image.channels) || o.std.size() != o.mean.size())) {
    throw std::invalid_argument("mean/std have " + std::to_string(o.mean.size()) + " channels, the image " +
                                std::to_string(image.channels));
  }
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32)));
  const std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  std::vector<Image> crops;
  for (int g = 0; g < 2; ++g) {
    Image crop = crop_and_resize(
        image, random_resized_crop_box(image.height, image.width, o.global_crops_scale, ratio, rng),
        o.global_crops_size);
    augment(crop, g == 0 ? 1.0 : 0.1, g == 0 ? 0.0 : 0.2, rng);
    normalize(crop, o);
    crops.push_back(std::move(crop));
  }
  for (int l = 0; l < o.local_crops_number; ++l) {
    Image crop = crop_and_resize(
        image, random_resized_crop_box(image.height, image.width, o.local_crops_scale, ratio, rng),
        o.local_crops_size);
    augment(crop, 0.5, 0.0, rng);
    normalize(crop, o);
    crops.push_back(std::move(crop));
  }
  return crops;
}

}  // namespace pcdino::train
