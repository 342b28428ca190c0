// DINO's multi-crop augmentation for multi-channel microscopy images, as scDINO's main_dino.py does it
// (DataAugmentationDINO with its channel-wise brightness in place of RGB colour jitter), and DINO's own
// RGB pipeline for `images_are_RGB`, on OpenCV. No LibTorch here: crops are pcdino::Image [C, H, W] floats
// in [0, 1] and become tensors in the trainer.
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

/// The crop sizes DINO and scDINO always train at (main_dino.py): the reference for augmentation
/// parameters given in pixels.
inline constexpr int kReferenceGlobalCropSize = 224;
inline constexpr int kReferenceLocalCropSize = 96;

/// Options of the multi-crop (main_dino.py's names).
struct MultiCropOptions {
  std::array<double, 2> global_crops_scale = {0.4, 1.0};
  std::array<double, 2> local_crops_scale = {0.05, 0.4};
  int local_crops_number = 8;
  int global_crops_size = 224;  ///< pixels
  int local_crops_size = 96;    ///< pixels
  std::vector<double> mean;     ///< per-channel normalisation (the mean/std stage's file); empty = none
  std::vector<double> std;
  bool rgb = false;  ///< DINO's RGB pipeline (meta.images_are_RGB) instead of scDINO's channel-wise one
  /// Blur sigma and kernel (pixels at 224/96-px crops) times crop size / kReference*CropSize.
  bool scale_augmentation_to_crop = true;
  bool vflip = true;  ///< vertical flip p 0.5 (scDINO's; DINO's RGB pipeline has none: set false there)
};

// The colour operations of torchvision's ColorJitter and RandomGrayscale on a [3, H, W] image in [0, 1],
// with the formulas of torchvision.transforms.functional_tensor (each result clamped to [0, 1]).
// Each throws std::invalid_argument if the image does not have 3 channels.

/// x * factor.
void adjust_brightness(Image& rgb, double factor);
/// factor * x + (1 - factor) * m, m the mean of the image's grayscale.
void adjust_contrast(Image& rgb, double factor);
/// factor * x + (1 - factor) * gray(x), per pixel.
void adjust_saturation(Image& rgb, double factor);
/// Hue rotated by `shift` turns (|shift| <= 0.5) in HSV space.
void adjust_hue(Image& rgb, double shift);
/// Every channel set to gray = 0.2989 R + 0.587 G + 0.114 B.
void to_grayscale(Image& rgb);
/// DINO's flip_and_color_jitter: horizontal flip p 0.5; with p 0.8 ColorJitter(brightness 0.4, contrast
/// 0.4, saturation 0.2, hue 0.1), its four operations in a random order with factors U(0.6, 1.4),
/// U(0.6, 1.4), U(0.8, 1.2) and a hue shift U(-0.1, 0.1); grayscale p 0.2.
void flip_and_color_jitter(Image& rgb, std::mt19937& rng);

/// Crops of one image, each [C, size, size]: 2 global crops (random resized crop, bicubic; horizontal
/// flip p 0.5 and, with `vflip`, vertical flip p 0.5; per-channel brightness factor U(0.5, 1.25) with p 0.8,
/// clamped to [0, 1]; Gaussian blur 5x5 with sigma U(0.1, 1.5) (both times s, below), p 1.0 on the first and
/// 0.1 on the second; solarisation (x > 0.5 -> 1 - x) p 0.2 on the second), then `local_crops_number` local
/// crops (same, blur p 0.5, no solarisation), then normalisation. `seed` fixes every random choice, so a
/// sample's crops do not depend on which thread makes them. With `rgb`, DINO's RGB pipeline (main_dino.py's
/// DataAugmentationDINO) instead: flip_and_color_jitter() in place of the flips and brightness, Gaussian blur
/// with sigma U(0.1, 2.0) (kernel from sigma) at the same probabilities, solarisation at 128/255, and a
/// vertical flip p 0.5 before them only with `vflip`. With `scale_augmentation_to_crop`, s = crop size / 224
/// (global) or / 96 (local) scales the blur's sigma, and scDINO's 5x5 kernel to 2 round(2 s) + 1 pixels (none
/// below s = 0.25); s = 1 at the reference's sizes, so 224/96-px runs are unchanged.
/// Throws std::invalid_argument if mean/std do not match the channels, or `rgb` and not 3 channels.
std::vector<Image> multi_crop(const Image& image, const MultiCropOptions& options, std::uint64_t seed);

/// Turns OpenCV's own thread pool off for the whole process, so that multi_crop() runs on the thread that
/// calls it: the loader's parallelism is its threads (--loader-threads, as a DataLoader's workers, where
/// PyTorch sets one intra-op thread), each one core's work, and none of it spills onto the cores of the step.
void run_opencv_on_calling_threads();

/// The side of each crop multi_crop() makes, in its order: 2 global, then the local ones (pixels).
std::vector<int> multi_crop_sizes(const MultiCropOptions& options);

/// multi_crop() into memory the caller owns: crops[k] holds image.channels x S_k x S_k floats, S_k =
/// multi_crop_sizes(options)[k] (a sample's row of each batch tensor: the crops are made where the step
/// reads them, with no allocation and no copy). The same values as multi_crop(). Throws
/// std::invalid_argument as multi_crop() does, or if crops.size() is not the number of crops.
void multi_crop_into(const Image& image, const MultiCropOptions& options, std::uint64_t seed,
                     const std::vector<float*>& crops);

/// The seed of sample `index` in `epoch` of a run with `seed`: distinct for every (seed, epoch, index).
std::uint64_t sample_seed(std::uint64_t seed, int epoch, std::uint64_t index);

}  // namespace pcdino::train
