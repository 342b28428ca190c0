#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/split.hpp"

namespace pcdino {
namespace {

// numpy.random.seed(seed); numpy.random.shuffle(arange(n)), computed by Debian's numpy itself.
std::vector<std::size_t> numpy_reference(std::size_t n, std::uint32_t seed) {
  const std::string cmd = "/usr/bin/python3 -c 'import numpy as np; np.random.seed(" + std::to_string(seed) +
                          "); a = np.arange(" + std::to_string(n) +
                          "); np.random.shuffle(a); print(\" \".join(map(str, a)))'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
  std::vector<std::size_t> values;
  std::istringstream in(out);
  for (std::size_t v; in >> v;) values.push_back(v);
  return values;
}

TEST(Split, PermutationMatchesNumpy) {
  for (const auto& [n, seed] : std::vector<std::pair<std::size_t, std::uint32_t>>{
           {10, 40}, {1000, 0}, {70000, 40}, {12345, 4294967295u}, {2, 7}}) {
    const auto expected = numpy_reference(n, seed);
    ASSERT_EQ(expected.size(), n)
        << "python3-numpy is needed for this test (scripts/install-deps installs it)";
    EXPECT_EQ(numpy_permutation(n, seed), expected) << "n=" << n << " seed=" << seed;
  }
  EXPECT_TRUE(numpy_permutation(0, 1).empty());
  EXPECT_EQ(numpy_permutation(1, 1), std::vector<std::size_t>{0});
}

TEST(Split, HeldOutIsTheFirstFloorOfThePermutation) {
  const auto perm = numpy_permutation(101, 40);
  const Split s = train_heldout_split(101, 0.8, 40);
  const std::size_t held = static_cast<std::size_t>(std::floor((1.0 - 0.8) * 101));  // 20
  ASSERT_EQ(s.held_out.size(), held);
  ASSERT_EQ(s.train.size(), 101 - held);
  EXPECT_TRUE(std::equal(s.held_out.begin(), s.held_out.end(), perm.begin()));
  EXPECT_TRUE(std::equal(s.train.begin(), s.train.end(), perm.begin() + static_cast<long>(held)));
  EXPECT_TRUE(train_heldout_split(50, 1.0, 3).held_out.empty());
  EXPECT_THROW(train_heldout_split(10, 0.0, 1), ConfigError);
}

TEST(Split, MeanStdSampleUsesTheSameConvention) {
  const auto sample = mean_std_sample(1000, 0.2, 40);
  EXPECT_EQ(sample.size(), 1000u - 800u);
  EXPECT_EQ(sample, train_heldout_split(1000, 0.2, 40).train);
  EXPECT_THROW(mean_std_sample(10, 1.5, 1), ConfigError);
}

TEST(Split, ShardsCoverEachIndexOnce) {
  std::vector<std::size_t> indices(103);
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = 1000 + i;
  for (int world = 1; world <= 4; ++world) {
    std::multiset<std::size_t> seen;
    std::size_t smallest = indices.size(), largest = 0;
    for (int r = 0; r < world; ++r) {
      const auto mine = shard(indices, r, world);
      smallest = std::min(smallest, mine.size());
      largest = std::max(largest, mine.size());
      seen.insert(mine.begin(), mine.end());
    }
    EXPECT_EQ(seen, std::multiset<std::size_t>(indices.begin(), indices.end())) << "world " << world;
    EXPECT_LE(largest - smallest, 1u);
  }
  EXPECT_TRUE(shard(indices, 3, 2).empty());
}

}  // namespace
}  // namespace pcdino
