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

// `pixel_scale`: crop size / the reference's (scale_augmentation_to_crop), applied to the blur's sigma and
// kernel, which the reference gives in pixels of a 224/96-px crop.
void augment(Image& img, double blur_p, double solarize_p, double pixel_scale, bool vflip_allowed,
             std::mt19937& rng) {
  const bool hflip = chance(rng, 0.5), vflip = vflip_allowed && chance(rng, 0.5);
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
    const double sigma = uniform(rng, 0.1, 1.5) * pixel_scale;
    const int kernel = 2 * static_cast<int>(std::lround(2.0 * pixel_scale)) + 1;  // scDINO's 5x5 at scale 1
    for (int c = 0; kernel > 1 && c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::GaussianBlur(p, p, cv::Size(kernel, kernel), sigma, sigma, cv::BORDER_REFLECT_101);
    }
  }
  if (chance(rng, solarize_p)) {
    for (float& v : img.data) v = v > 0.5f ? 1.0f - v : v;
  }
}

void require_rgb(const Image& img) {
  if (img.channels != 3) {
    throw std::invalid_argument("an RGB operation on an image with " + std::to_string(img.channels) +
                                " channels (meta.images_are_RGB needs 3)");
  }
}

std::size_t pixels(const Image& img) {
  return static_cast<std::size_t>(img.height) * static_cast<std::size_t>(img.width);
}

float clamp01(double v) {
  return static_cast<float>(std::min(1.0, std::max(0.0, v)));
}

float gray_of(const float* r, const float* g, const float* b, std::size_t i) {
  return 0.2989F * r[i] + 0.587F * g[i] + 0.114F * b[i];
}

void augment_rgb(Image& img, double blur_p, double solarize_p, double pixel_scale, bool vflip,
                 std::mt19937& rng) {
  // DINO resizes PIL images, whose 8-bit values clip the bicubic overshoot; do the same.
  for (float& v : img.data) v = std::min(1.0F, std::max(0.0F, v));
  if (vflip && chance(rng, 0.5)) {  // not in DINO's pipeline: only when `vflip` asks for it
    for (int c = 0; c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::flip(p, p, 0);
    }
  }
  flip_and_color_jitter(img, rng);
  if (chance(rng, blur_p)) {
    // DINO's GaussianBlur(radius_min=0.1, radius_max=2.0), in pixels of its 224/96-px crops.
    const double sigma = uniform(rng, 0.1, 2.0) * pixel_scale;
    for (int c = 0; c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::GaussianBlur(p, p, cv::Size(0, 0), sigma, sigma, cv::BORDER_REFLECT_101);
    }
  }
  if (chance(rng, solarize_p)) {  // PIL's ImageOps.solarize(threshold=128) on 8-bit values
    for (float& v : img.data) v = v >= 128.0F / 255.0F ? 1.0F - v : v;
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

void adjust_brightness(Image& rgb, double factor) {
  require_rgb(rgb);
  for (float& v : rgb.data) v = clamp01(v * factor);
}

void adjust_contrast(Image& rgb, double factor) {
  require_rgb(rgb);
  const std::size_t n = pixels(rgb);
  const float *r = rgb.data.data(), *g = r + n, *b = g + n;
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += gray_of(r, g, b, i);
  mean /= static_cast<double>(n);
  for (float& v : rgb.data) v = clamp01(factor * v + (1 - factor) * mean);
}

void adjust_saturation(Image& rgb, double factor) {
  require_rgb(rgb);
  const std::size_t n = pixels(rgb);
  float *r = rgb.data.data(), *g = r + n, *b = g + n;
  for (std::size_t i = 0; i < n; ++i) {
    const double gray = gray_of(r, g, b, i);
    r[i] = clamp01(factor * r[i] + (1 - factor) * gray);
    g[i] = clamp01(factor * g[i] + (1 - factor) * gray);
    b[i] = clamp01(factor * b[i] + (1 - factor) * gray);
  }
}

void adjust_hue(Image& rgb, double shift) {
  require_rgb(rgb);
  const std::size_t n = pixels(rgb);
  float *r = rgb.data.data(), *g = r + n, *b = g + n;
  for (std::size_t i = 0; i < n; ++i) {
    // RGB -> HSV as torchvision's _rgb2hsv, shift, HSV -> RGB as its _hsv2rgb.
    const double R = r[i], G = g[i], B = b[i];
    const double maxc = std::max({R, G, B}), minc = std::min({R, G, B});
    const bool eqc = maxc == minc;
    const double cr = maxc - minc;
    const double s = cr / (eqc ? 1.0 : maxc);
    const double div = eqc ? 1.0 : cr;
    const double rc = (maxc - R) / div, gc = (maxc - G) / div, bc = (maxc - B) / div;
    double h = 0;
    if (maxc == R) {
      h = bc - gc;
    } else if (maxc == G) {
      h = 2.0 + rc - bc;
    } else {
      h = 4.0 + gc - rc;
    }
    h = std::fmod(h / 6.0 + 1.0, 1.0);
    h = std::fmod(h + shift + 1.0, 1.0);
    const double v = maxc;
    const double i6 = std::floor(h * 6.0);
    const double f = h * 6.0 - i6;
    const double p = std::clamp(v * (1.0 - s), 0.0, 1.0);
    const double q = std::clamp(v * (1.0 - s * f), 0.0, 1.0);
    const double t = std::clamp(v * (1.0 - s * (1.0 - f)), 0.0, 1.0);
    double out[3];
    switch (static_cast<int>(i6) % 6) {
      case 0:
        out[0] = v, out[1] = t, out[2] = p;
        break;
      case 1:
        out[0] = q, out[1] = v, out[2] = p;
        break;
      case 2:
        out[0] = p, out[1] = v, out[2] = t;
        break;
      case 3:
        out[0] = p, out[1] = q, out[2] = v;
        break;
      case 4:
        out[0] = t, out[1] = p, out[2] = v;
        break;
      default:
        out[0] = v, out[1] = p, out[2] = q;
        break;
    }
    r[i] = clamp01(out[0]), g[i] = clamp01(out[1]), b[i] = clamp01(out[2]);
  }
}

void to_grayscale(Image& rgb) {
  require_rgb(rgb);
  const std::size_t n = pixels(rgb);
  float *r = rgb.data.data(), *g = r + n, *b = g + n;
  for (std::size_t i = 0; i < n; ++i) r[i] = g[i] = b[i] = gray_of(r, g, b, i);
}

void flip_and_color_jitter(Image& rgb, std::mt19937& rng) {
  require_rgb(rgb);
  if (chance(rng, 0.5)) {
    for (int c = 0; c < rgb.channels; ++c) {
      cv::Mat p = plane(rgb, c);
      cv::flip(p, p, 1);
    }
  }
  if (chance(rng, 0.8)) {
    std::array<int, 4> order = {0, 1, 2, 3};
    std::shuffle(order.begin(), order.end(), rng);
    const double brightness = uniform(rng, 0.6, 1.4), contrast = uniform(rng, 0.6, 1.4);
    const double saturation = uniform(rng, 0.8, 1.2), hue = uniform(rng, -0.1, 0.1);
    for (int op : order) {
      if (op == 0) adjust_brightness(rgb, brightness);
      if (op == 1) adjust_contrast(rgb, contrast);
      if (op == 2) adjust_saturation(rgb, saturation);
      if (op == 3) adjust_hue(rgb, hue);
    }
  }
  if (chance(rng, 0.2)) to_grayscale(rgb);
}

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
  if (o.rgb) require_rgb(image);
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32)));
  const std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  const auto pixel_scale = [&o](int size, int reference) {
    return o.scale_augmentation_to_crop ? static_cast<double>(size) / reference : 1.0;
  };
  const double global_scale = pixel_scale(o.global_crops_size, kReferenceGlobalCropSize);
  const double local_scale = pixel_scale(o.local_crops_size, kReferenceLocalCropSize);
  const auto apply = [&o, &rng](Image& crop, double blur_p, double solarize_p, double scale) {
    if (o.rgb) {
      augment_rgb(crop, blur_p, solarize_p, scale, o.vflip, rng);
    } else {
      augment(crop, blur_p, solarize_p, scale, o.vflip, rng);
    }
  };
  std::vector<Image> crops;
  for (int g = 0; g < 2; ++g) {
    Image crop = crop_and_resize(
        image, random_resized_crop_box(image.height, image.width, o.global_crops_scale, ratio, rng),
        o.global_crops_size);
    apply(crop, g == 0 ? 1.0 : 0.1, g == 0 ? 0.0 : 0.2, global_scale);
    normalize(crop, o);
    crops.push_back(std::move(crop));
  }
  for (int l = 0; l < o.local_crops_number; ++l) {
    Image crop = crop_and_resize(
        image, random_resized_crop_box(image.height, image.width, o.local_crops_scale, ratio, rng),
        o.local_crops_size);
    apply(crop, 0.5, 0.0, local_scale);
    normalize(crop, o);
    crops.push_back(std::move(crop));
  }
  return crops;
}

}  // namespace pcdino::train
