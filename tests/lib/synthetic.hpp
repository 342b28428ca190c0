// Synthetic datasets whose per-channel mean and std after min-max scaling are known in closed form.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "pcdino/core/image.hpp"
#include "temp_dir.hpp"

namespace pcdino::test {

/// Channel kinds: `ones` pixels of P at the image's high value and the rest at its low value (after
/// min-max: a Bernoulli channel with p = ones / P), or a ramp low + j * step over the pixels j (after
/// min-max: j / (P - 1)). Low, high, step and the pixel order change per image, the scaled values do not.
struct ChannelSpec {
  bool ramp = false;
  int ones = 1;
};

/// Exact mean and population std of a channel over any number of such images of P pixels.
inline std::pair<double, double> closed_form(const ChannelSpec& c, int pixels) {
  if (c.ramp) {
    // mean of j/(P-1) is 1/2; variance of j over 0..P-1 is (P^2 - 1) / 12.
    const double var = (double(pixels) * pixels - 1) / 12.0 / ((pixels - 1.0) * (pixels - 1.0));
    return {0.5, std::sqrt(var)};
  }
  const double p = double(c.ones) / pixels;
  return {p, std::sqrt(p * (1 - p))};
}

/// Writes `per_class` images into each of `classes` class folders under `dir`.
inline void write_synthetic_dataset(const std::string& dir, int classes, int per_class, int side,
                                    PixelType type, const std::vector<ChannelSpec>& channels, unsigned seed) {
  std::mt19937 rng(seed);
  const double max_value = type == PixelType::kUint8 ? 255 : type == PixelType::kUint16 ? 65535 : 1000;
  const int pixels = side * side;
  for (int k = 0; k < classes; ++k) {
    for (int i = 0; i < per_class; ++i) {
      std::vector<double> samples(std::size_t(pixels) * channels.size());
      for (std::size_t c = 0; c < channels.size(); ++c) {
        std::vector<int> order(pixels);
        for (int j = 0; j < pixels; ++j) order[j] = j;
        std::shuffle(order.begin(), order.end(), rng);
        std::uniform_int_distribution<int> low_dist(0, static_cast<int>(max_value / 4));
        const double low = low_dist(rng);
        if (channels[c].ramp) {
          const double step = std::floor((max_value - low) / (pixels - 1));
          for (int j = 0; j < pixels; ++j) samples[order[j] * channels.size() + c] = low + j * step;
        } else {
          std::uniform_int_distribution<int> high_dist(static_cast<int>(low) + 1,
                                                       static_cast<int>(max_value));
          const double high = high_dist(rng);
          for (int j = 0; j < pixels; ++j)
            samples[order[j] * channels.size() + c] = j < channels[c].ones ? high : low;
        }
      }
      const std::string path = dir + "/class" + std::to_string(k) + "/img" + std::to_string(i) + ".tif";
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      write_tiff(path, make_image(side, side, static_cast<int>(channels.size()), type, samples));
    }
  }
}

}  // namespace pcdino::test
