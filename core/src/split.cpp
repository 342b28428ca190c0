#include "pcdino/core/split.hpp"

#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "pcdino/core/error.hpp"

namespace pcdino {
namespace {

// numpy's random_interval(): a uniform integer in [0, max] by masking and rejection.
std::uint64_t random_interval(std::mt19937& mt, std::uint64_t max) {
  if (max == 0) return 0;
  std::uint64_t mask = max;
  for (int shift : {1, 2, 4, 8, 16, 32}) mask |= mask >> shift;
  std::uint64_t value = 0;
  if (max <= 0xffffffffULL) {
    while ((value = (static_cast<std::uint64_t>(mt()) & mask)) > max) {
    }
  } else {
    // numpy's next_uint64 for MT19937: two 32-bit draws, high word first.
    while ((value = (((static_cast<std::uint64_t>(mt()) << 32) | mt()) & mask)) > max) {
    }
  }
  return value;
}

std::size_t held_out_count(std::size_t n, double fraction) {
  return static_cast<std::size_t>(std::floor((1.0 - fraction) * static_cast<double>(n)));
}

}  // namespace

std::vector<std::size_t> numpy_permutation(std::size_t n, std::uint32_t seed) {
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 mt(seed);  // init_genrand(seed), as numpy's legacy seeding of a 32-bit integer
  for (std::size_t i = n > 0 ? n - 1 : 0; i >= 1; --i) {
    const std::size_t j = random_interval(mt, i);
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

Split train_heldout_split(std::size_t n, double train_fraction, std::uint32_t seed) {
  if (!(train_fraction > 0 && train_fraction <= 1)) {
    throw ConfigError("meta.train_datasetsplit_fraction must be in (0, 1], got " +
                      std::to_string(train_fraction));
  }
  const auto perm = numpy_permutation(n, seed);
  const std::size_t held = held_out_count(n, train_fraction);
  Split split;
  split.held_out.assign(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(held));
  split.train.assign(perm.begin() + static_cast<std::ptrdiff_t>(held), perm.end());
  return split;
}

std::vector<std::size_t> mean_std_sample(std::size_t n, double fraction, std::uint32_t seed) {
  if (!(fraction > 0 && fraction <= 1)) {
    throw ConfigError("train_scDINO.fraction_for_mean_std_calc must be in (0, 1], got " +
                      std::to_string(fraction));
  }
  const auto perm = numpy_permutation(n, seed);
  return {perm.begin() + static_cast<std::ptrdiff_t>(held_out_count(n, fraction)), perm.end()};
}

std::vector<std::size_t> shard(const std::vector<std::size_t>& indices, int rank, int world_size) {
  std::vector<std::size_t> mine;
  if (world_size <= 0 || rank < 0 || rank >= world_size) return mine;
  for (std::size_t i = static_cast<std::size_t>(rank); i < indices.size();
       i += static_cast<std::size_t>(world_size)) {
    mine.push_back(indices[i]);
  }
  return mine;
}

}  // namespace pcdino
