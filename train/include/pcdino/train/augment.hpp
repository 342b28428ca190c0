// DINO's multi-crop augmentation for multi-channel microscopy images, as scDINO's main_dino.py does it
// (DataAugmentationDINO with its channel-wise brightness in place of RGB colour jitter), on OpenCV. No
// LibTorch here: crops are pcdino::Image [C, H, W] floats and become tensors in the trainer.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "pcdino/core/image.hpp"

namespace pcdino::train {

/// The box torchvision's RandomResizedCrop.get_params picks: top, left, height, width (pixels).
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
};

/// torchvision's RandomResizedCrop.get_params: up to 10 tries of an area fraction U(scale) and a
/// log-uniform aspect ratio in `ratio` that fits the image, else the central crop with the ratio clamped.
CropBox random_resized_crop_box(int height, int width, std::array<double, 2> scale,
                                std::array<double, 2> ratio, std::mt19937& rng);

/// Options of the multi-crop (main_dino.py's names).
struct MultiCropOptions {
  std::array<double, 2> global_crops_scale = {0.4, 1.0};
  std::array<double, 2> local_crops_scale = {0.05, 0.4};
  int local_crops_number = 8;
  int global_crops_size = 224;  ///< pixels
  int local_crops_size = 96;    ///< pixels
  std::vector<double> mean;     ///< per-channel normalisation (the mean/std stage's file); empty = none
  std::vector<double> std;
};

/// Crops of one image, each [C, size, size]: 2 global crops (random resized crop, bicubic; horizontal and
/// vertical flip p 0.5; per-channel brightness factor U(0.5, 1.25) with p 0.8, clamped to [0, 1];
/// Gaussian blur 5x5 with sigma U(0.1, 1.5), p 1.0 on the first and 0.1 on the second; solarisation
/// (x > 0.5 -> 1 - x) p 0.2 on the second), then `local_crops_number` local crops (same, blur p 0.5, no
/// solarisation), then normalisation. `seed` fixes every random choice, so a sample's crops do not depend
/// on which thread makes them. Throws std::invalid_argument if mean/std do not match the channels.
std::vector<Image> multi_crop(const Image& image, const MultiCropOptions& options, std::uint64_t seed);

/// The seed of sample `index` in `epoch` of a run with `seed`: distinct for every (seed, epoch, index).
std::uint64_t sample_seed(std::uint64_t seed, int epoch, std::uint64_t index);

}  // namespace pcdino::train
