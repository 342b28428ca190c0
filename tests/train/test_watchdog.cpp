// The watchdog (issue #5, #39): a rank without progress ends with exit 74, and a stop (SIGTERM, SIGUSR1)
// that the ranks do not agree on ends it sooner, while an agreed stop keeps the long deadline for the
// checkpoint that follows it. Death tests: the watchdog ends the whole process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "pcdino/core/log.hpp"
#include "pcdino/train/watchdog.hpp"

namespace pcdino::train {
namespace {

using std::chrono::milliseconds;

// The programs' logger (stderr, where a death test looks for the message).
class WatchdogDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { init_logging(0, 1); }
};

TEST_F(WatchdogDeathTest, NoProgressEndsTheRankWith74) {
  EXPECT_EXIT(
      {
        Watchdog w(1, 1, 2);
        w.progress("epoch 1 iteration 3");
        std::this_thread::sleep_for(std::chrono::seconds(20));
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(74), "rank 1 of 2: no progress for 1 s after epoch 1 iteration 3");
}

TEST_F(WatchdogDeathTest, AStopTheRanksDoNotAgreeOnEndsTheRankBeforeTheCommTimeout) {
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{false};
        Watchdog w(600, 0, 2, &stop, 2);
        w.progress("epoch 2 iteration 5");
        stop.store(true);  // as the signal handler does; then this rank waits on a dead peer
        std::this_thread::sleep_for(std::chrono::seconds(20));
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(74),
      "asked to stop .* did not agree on it within 2 s after epoch 2 iteration 5");
}

TEST_F(WatchdogDeathTest, AnAgreedStopKeepsTheLongDeadline) {
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{true};
        Watchdog w(600, 0, 2, &stop, 1);
        std::this_thread::sleep_for(milliseconds(100));
        w.progress("epoch 2 iteration 6");  // the agreement; the checkpoint write follows
        std::this_thread::sleep_for(milliseconds(3500));
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(WatchdogDeathTest, WithoutAStopProgressKeepsTheRankAlive) {
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{false};
        Watchdog w(2, 0, 2, &stop, 1);
        for (int i = 0; i < 30; ++i) {
          std::this_thread::sleep_for(milliseconds(100));
          w.progress("iteration " + std::to_string(i));
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace pcdino::train
