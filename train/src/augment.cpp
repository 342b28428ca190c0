#include "pcdino/train/augment.hpp"

#include <algorithm>
#include <cmath>
#include <opencv2/core/utility.hpp>
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

// [C, H, W] floats in memory someone else owns: an Image's, or one sample's row of a batch tensor, which
// the crops are made in place in (no per-crop allocation, no copy into the batch).
struct Planes {
  int channels = 0, height = 0, width = 0;
  float* data = nullptr;
  std::size_t size() const { return static_cast<std::size_t>(channels) * height * width; }
  float* begin() const { return data; }
  float* end() const { return data + size(); }
};

Planes view(Image& img) {
  return {img.channels, img.height, img.width, img.data.data()};
}

// One channel plane as an OpenCV matrix sharing the planes' memory.
cv::Mat plane(const Planes& img, int c) {
  return cv::Mat(img.height, img.width, CV_32FC1,
                 img.data + static_cast<std::size_t>(c) * img.height * img.width);
}

// Resizes `box` of every channel of `src` into `out` (its channels and size set by the caller): OpenCV
// writes into a destination of the right size and type without reallocating it.
void crop_and_resize(const Image& src, const CropBox& box, const Planes& out) {
  for (int c = 0; c < src.channels; ++c) {
    const cv::Mat full(
        src.height, src.width, CV_32FC1,
        const_cast<float*>(src.data.data()) + static_cast<std::size_t>(c) * src.height * src.width);
    cv::Mat dst = plane(out, c);
    cv::resize(full(cv::Rect(box.left, box.top, box.width, box.height)), dst, cv::Size(out.width, out.height),
               0, 0, cv::INTER_CUBIC);
  }
}

// `pixel_scale`: crop size / the reference's (scale_augmentation_to_crop), applied to the blur's sigma and
// kernel, which the reference gives in pixels of a 224/96-px crop.
void augment(const Planes& img, double blur_p, double solarize_p, double pixel_scale, bool vflip_allowed,
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
    for (float& v : img) v = v > 0.5f ? 1.0f - v : v;
  }
}

template <class Img>
void require_rgb(const Img& img) {
  if (img.channels != 3) {
    throw std::invalid_argument("an RGB operation on an image with " + std::to_string(img.channels) +
                                " channels (meta.images_are_RGB needs 3)");
  }
}

std::size_t pixels(const Planes& img) {
  return static_cast<std::size_t>(img.height) * static_cast<std::size_t>(img.width);
}

float gray_of(const float* r, const float* g, const float* b, std::size_t i) {
  return 0.2989F * r[i] + 0.587F * g[i] + 0.114F * b[i];
}

void color_jitter(const Planes& rgb, std::mt19937& rng);

void augment_rgb(const Planes& img, double blur_p, double solarize_p, double pixel_scale, bool vflip,
                 std::mt19937& rng) {
  // DINO resizes PIL images, whose 8-bit values clip the bicubic overshoot; do the same.
  for (float& v : img) v = std::min(1.0F, std::max(0.0F, v));
  if (vflip && chance(rng, 0.5)) {  // not in DINO's pipeline: only when `vflip` asks for it
    for (int c = 0; c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::flip(p, p, 0);
    }
  }
  color_jitter(img, rng);
  if (chance(rng, blur_p)) {
    // DINO's GaussianBlur(radius_min=0.1, radius_max=2.0), in pixels of its 224/96-px crops.
    const double sigma = uniform(rng, 0.1, 2.0) * pixel_scale;
    for (int c = 0; c < img.channels; ++c) {
      cv::Mat p = plane(img, c);
      cv::GaussianBlur(p, p, cv::Size(0, 0), sigma, sigma, cv::BORDER_REFLECT_101);
    }
  }
  if (chance(rng, solarize_p)) {  // PIL's ImageOps.solarize(threshold=128) on 8-bit values
    for (float& v : img) v = v >= 128.0F / 255.0F ? 1.0F - v : v;
  }
}

void normalize(const Planes& img, const MultiCropOptions& o) {
  if (o.mean.empty()) return;
  const std::size_t plane_size = static_cast<std::size_t>(img.height) * img.width;
  for (int c = 0; c < img.channels; ++c) {
    const auto m = static_cast<float>(o.mean[static_cast<std::size_t>(c)]);
    const auto s = static_cast<float>(o.std[static_cast<std::size_t>(c)]);
    float* p = img.data + static_cast<std::size_t>(c) * plane_size;
    for (std::size_t i = 0; i < plane_size; ++i) p[i] = (p[i] - m) / s;
  }
}

float clamp01f(float v) {
  return std::min(1.0F, std::max(0.0F, v));
}

// torchvision's colour operations (augment.hpp) on planes the caller has checked to be RGB, in float32 as
// functional_tensor computes them, and written as selects rather than branches so that they vectorise.
namespace colour {

void brightness(const Planes& rgb, double factor) {
  const auto f = static_cast<float>(factor);
  for (float& v : rgb) v = clamp01f(v * f);
}

void contrast(const Planes& rgb, double factor) {
  const std::size_t n = pixels(rgb);
  const float *r = rgb.data, *g = r + n, *b = g + n;
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += gray_of(r, g, b, i);
  const auto f = static_cast<float>(factor);
  const auto offset = static_cast<float>((1 - factor) * mean / static_cast<double>(n));
  for (float& v : rgb) v = clamp01f(f * v + offset);
}

void saturation(const Planes& rgb, double factor) {
  const std::size_t n = pixels(rgb);
  float *r = rgb.data, *g = r + n, *b = g + n;
  const auto f = static_cast<float>(factor), rest = static_cast<float>(1 - factor);
  for (std::size_t i = 0; i < n; ++i) {
    const float gray = gray_of(r, g, b, i);
    r[i] = clamp01f(f * r[i] + rest * gray);
    g[i] = clamp01f(f * g[i] + rest * gray);
    b[i] = clamp01f(f * b[i] + rest * gray);
  }
}

void hue(const Planes& rgb, double shift) {
  const std::size_t n = pixels(rgb);
  float *r = rgb.data, *g = r + n, *b = g + n;
  const auto turn = static_cast<float>(shift);
  for (std::size_t i = 0; i < n; ++i) {
    // RGB -> HSV as torchvision's _rgb2hsv, the hue turned, HSV -> RGB as its _hsv2rgb.
    const float R = r[i], G = g[i], B = b[i];
    const float maxc = std::max(R, std::max(G, B)), minc = std::min(R, std::min(G, B));
    const bool eqc = maxc == minc;
    const float cr = maxc - minc;
    const float s = cr / (eqc ? 1.0F : maxc);
    const float div = eqc ? 1.0F : cr;
    const float rc = (maxc - R) / div, gc = (maxc - G) / div, bc = (maxc - B) / div;
    float h0 = maxc == G ? 2.0F + rc - bc : 4.0F + gc - rc;
    h0 = maxc == R ? bc - gc : h0;
    // floor by truncation of positive values, which vectorises without SSE4.1's roundps: h0 / 6 + 1 lies in
    // [5/6, 11/6], h + turn + 1 in (1/2, 5/2).
    float h = h0 / 6.0F + 1.0F;
    h -= static_cast<float>(static_cast<int>(h));  // torch.fmod(x, 1) for x >= 0
    h += turn + 1.0F;
    h -= static_cast<float>(static_cast<int>(h));  // Python's % 1.0
    // HSV -> RGB without sectors: channel n (R 5, G 3, B 1) is v - v s clamp(min(k, 4 - k), 0, 1), k = (n +
    // 6 h) mod 6, which is _hsv2rgb's (v, t, p, p, q, v ...) per sector, and a select the vectoriser takes.
    const float v = maxc, h6 = h * 6.0F, vs = v * s;
    const auto channel = [v, vs, h6](float offset) {
      float k = offset + h6;
      k = k >= 6.0F ? k - 6.0F : k;
      const float ramp = std::min(std::min(k, 4.0F - k), 1.0F);
      return clamp01f(v - vs * (ramp > 0.0F ? ramp : 0.0F));
    };
    const float out_r = channel(5.0F), out_g = channel(3.0F), out_b = channel(1.0F);
    r[i] = out_r, g[i] = out_g, b[i] = out_b;
  }
}

void grayscale(const Planes& rgb) {
  const std::size_t n = pixels(rgb);
  float *r = rgb.data, *g = r + n, *b = g + n;
  for (std::size_t i = 0; i < n; ++i) r[i] = g[i] = b[i] = gray_of(r, g, b, i);
}

}  // namespace colour

void color_jitter(const Planes& rgb, std::mt19937& rng) {
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
      if (op == 0) colour::brightness(rgb, brightness);
      if (op == 1) colour::contrast(rgb, contrast);
      if (op == 2) colour::saturation(rgb, saturation);
      if (op == 3) colour::hue(rgb, hue);
    }
  }
  if (chance(rng, 0.2)) colour::grayscale(rgb);
}

}  // namespace

void adjust_brightness(Image& rgb, double factor) {
  require_rgb(rgb);
  colour::brightness(view(rgb), factor);
}
void adjust_contrast(Image& rgb, double factor) {
  require_rgb(rgb);
  colour::contrast(view(rgb), factor);
}
void adjust_saturation(Image& rgb, double factor) {
  require_rgb(rgb);
  colour::saturation(view(rgb), factor);
}
void adjust_hue(Image& rgb, double shift) {
  require_rgb(rgb);
  colour::hue(view(rgb), shift);
}
void to_grayscale(Image& rgb) {
  require_rgb(rgb);
  colour::grayscale(view(rgb));
}
void flip_and_color_jitter(Image& rgb, std::mt19937& rng) {
  require_rgb(rgb);
  color_jitter(view(rgb), rng);
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

void run_opencv_on_calling_threads() {
  cv::setNumThreads(0);  // 0: every OpenCV function runs sequentially on its caller's thread
}

std::uint64_t sample_seed(std::uint64_t seed, int epoch, std::uint64_t index) {
  // splitmix64 over the three numbers: well mixed, and cheap.
  std::uint64_t z =
      seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(epoch) * 0xBF58476D1CE4E5B9ULL + index;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::vector<int> multi_crop_sizes(const MultiCropOptions& o) {
  std::vector<int> sizes(2, o.global_crops_size);
  sizes.insert(sizes.end(), static_cast<std::size_t>(std::max(0, o.local_crops_number)), o.local_crops_size);
  return sizes;
}

void multi_crop_into(const Image& image, const MultiCropOptions& o, std::uint64_t seed,
                     const std::vector<float*>& crops) {
  if (!o.mean.empty() &&
      (o.mean.size() != static_cast<std::size_t>(image.channels) || o.std.size() != o.mean.size())) {
    throw std::invalid_argument("mean/std have " + std::to_string(o.mean.size()) + " channels, the image " +
                                std::to_string(image.channels));
  }
  if (o.rgb) require_rgb(image);
  const std::vector<int> sizes = multi_crop_sizes(o);
  if (crops.size() != sizes.size()) {
    throw std::invalid_argument(std::to_string(crops.size()) + " crop buffers for " +
                                std::to_string(sizes.size()) + " crops");
  }
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed ^ (seed >> 32)));
  const std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0};
  const auto pixel_scale = [&o](int size, int reference) {
    return o.scale_augmentation_to_crop ? static_cast<double>(size) / reference : 1.0;
  };
  const double global_scale = pixel_scale(o.global_crops_size, kReferenceGlobalCropSize);
  const double local_scale = pixel_scale(o.local_crops_size, kReferenceLocalCropSize);
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const bool global = k < 2;
    const Planes crop{image.channels, sizes[k], sizes[k], crops[k]};
    crop_and_resize(image,
                    random_resized_crop_box(image.height, image.width,
                                            global ? o.global_crops_scale : o.local_crops_scale, ratio, rng),
                    crop);
    // Blur p 1.0 on the first global crop, 0.1 on the second, 0.5 on the local ones; solarisation p 0.2
    // on the second global crop only.
    const double blur_p = !global ? 0.5 : k == 0 ? 1.0 : 0.1, solarize_p = k == 1 ? 0.2 : 0.0;
    const double scale = global ? global_scale : local_scale;
    if (o.rgb) {
      augment_rgb(crop, blur_p, solarize_p, scale, o.vflip, rng);
    } else {
      augment(crop, blur_p, solarize_p, scale, o.vflip, rng);
    }
    normalize(crop, o);
  }
}

std::vector<Image> multi_crop(const Image& image, const MultiCropOptions& o, std::uint64_t seed) {
  std::vector<Image> crops;
  std::vector<float*> buffers;
  for (int size : multi_crop_sizes(o)) {
    Image crop;
    crop.channels = image.channels;
    crop.height = crop.width = size;
    crop.data.resize(static_cast<std::size_t>(image.channels) * size * size);
    crops.push_back(std::move(crop));
  }
  for (Image& crop : crops) buffers.push_back(crop.data.data());
  multi_crop_into(image, o, seed, buffers);
  return crops;
}

}  // namespace pcdino::train
