// The reproducible train/held-out split shared by every stage, and the sampling and sharding of indices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pcdino {

/// The permutation of 0..n-1 that `numpy.random.seed(seed); numpy.random.shuffle(indices)` produces
/// (legacy RandomState: MT19937 seeded by init_genrand, Fisher-Yates from the end with numpy's masked
/// rejection sampling), so that a split made by scDINO's Python scripts and by pcdino agree.
std::vector<std::size_t> numpy_permutation(std::size_t n, std::uint32_t seed);

/// Indices of a dataset of `n` images split as scDINO does: permutation from `seed`, the first
/// floor((1 - train_fraction) * n) held out, the rest for training.
struct Split {
  std::vector<std::size_t> train;
  std::vector<std::size_t> held_out;
};

/// Throws ConfigError if `train_fraction` is not in (0, 1].
Split train_heldout_split(std::size_t n, double train_fraction, std::uint32_t seed);

/// The images the mean/std stage reads: the "train" part of a split with `fraction` in (0, 1], i.e.
/// n - floor((1 - fraction) * n) indices (scDINO's mean_std_dataset.py convention).
std::vector<std::size_t> mean_std_sample(std::size_t n, double fraction, std::uint32_t seed);

/// The share of `indices` that `rank` of `world_size` reads: every world_size-th element starting at
/// `rank`, so that shards differ in size by at most one and together cover `indices` exactly once.
std::vector<std::size_t> shard(const std::vector<std::size_t>& indices, int rank, int world_size);

}  // namespace pcdino
