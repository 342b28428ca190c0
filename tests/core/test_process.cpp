// Running another program (core/process.hpp): its output, its exit status, and a time limit that ends it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"

namespace pcdino {
namespace {

TEST(Process, OutputAndExitStatus) {
  const ProcessResult r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THROW(run_process({"/nonexistent/program"}, "a hint"), Error);
}

// A probe of a hung device or filesystem must end: the program is killed at the limit, what it printed kept.
TEST(Process, ATimeLimitEndsTheProgram) {
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_process({"sh", "-c", "echo started; exec sleep 30"}, "", 0.5);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(seconds, 10.0) << "ended near its 0.5 s limit, not after the 30 s sleep";
  EXPECT_FALSE(run_process({"true"}, "", 5).timed_out) << "a program within its limit";
}

// What the program started goes with it: the limit ends its process group, not only the program.
TEST(Process, ATimeLimitEndsWhatTheProgramStarted) {
  const ProcessResult r = run_process({"sh", "-c", "sleep 37.25 & sleep 37.25"}, "", 0.5);
  EXPECT_TRUE(r.timed_out);
  bool left = true;
  for (int i = 0; i < 100 && left; ++i) {
    left = run_process({"pgrep", "-f", "sleep 37.25"}).exit_code == 0;
    if (left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(left) << "the background sleep outlived the limit";
}

}  // namespace
}  // namespace pcdino
