#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "pcdino/core/prefetch.hpp"

namespace pcdino {
namespace {

TEST(Prefetcher, DeliversInOrderFromManyThreads) {
  for (std::size_t batch : {1, 7, 64}) {
    Prefetcher<int> p(
        500,
        [](std::size_t k) {
          if (k % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // finish out of order
          return static_cast<int>(k * 3);
        },
        4, 16, batch);
    for (int k = 0; k < 500; ++k) {
      auto v = p.next();
      ASSERT_TRUE(v.has_value()) << "batch " << batch;
      EXPECT_EQ(*v, 3 * k) << "batch " << batch;
    }
    EXPECT_FALSE(p.next().has_value());
  }
}

TEST(Prefetcher, BoundsWorkInFlight) {
  std::atomic<int> produced{0};
  Prefetcher<int> p(
      100,
      [&](std::size_t k) {
        ++produced;
        return static_cast<int>(k);
      },
      3, 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(produced.load(), 5);  // nothing taken yet: at most `capacity` items made
  p.next();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(produced.load(), 6);
}

TEST(Prefetcher, RethrowsAtTheFailingItem) {
  Prefetcher<int> p(
      10,
      [](std::size_t k) -> int {
        if (k == 4) throw std::runtime_error("item 4 is corrupt");
        return static_cast<int>(k);
      },
      2, 3);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(*p.next(), k);
  EXPECT_THROW(p.next(), std::runtime_error);
  EXPECT_EQ(*p.next(), 5);
}

TEST(Prefetcher, StopsEarlyWithoutHanging) {
  Prefetcher<int> p(
      1000000, [](std::size_t k) { return static_cast<int>(k); }, 2, 4);
  EXPECT_EQ(*p.next(), 0);
}  // destructor joins the workers

}  // namespace
}  // namespace pcdino
