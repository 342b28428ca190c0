// Unit tests of StepGraph's rules (warm-up, capture, replay, a failed capture, several ranks agreeing)
// over a recording GraphCapture: the CUDA capture itself needs a GPU and a LibTorch with CUDA,
// neither of which CI has. The CPU build's refusal is tested here and in tests/cli/test_cli.sh.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pcdino/core/error.hpp"
#include "pcdino/train/step_graph.hpp"

namespace pcdino::train {
namespace {

// What the StepGraph asked of its capture, in order ("eager", "capture", "replay", "drop"), and how
// often the step's body really ran (eagerly; a capture records it without running it).
struct Log {
  std::vector<std::string> calls;
  int body_runs = 0;
};

class RecordingCapture : public GraphCapture {
 public:
  enum class Failure { kNone, kClean, kLeftOpen };
  RecordingCapture(Log& log, Failure failure) : log_(log), failure_(failure) {}
  void eager(const std::function<void()>& body) override {
    log_.calls.push_back("eager");
    body();
  }
  void capture(const std::function<void()>&) override {
    log_.calls.push_back("capture");
    if (failure_ == Failure::kClean)
      throw std::runtime_error("operation not permitted when stream is capturing");
    if (failure_ == Failure::kLeftOpen) throw CaptureLeftOpen("capture invalidated");
  }
  void replay() override { log_.calls.push_back("replay"); }
  void drop() override { log_.calls.push_back("drop"); }

 private:
  Log& log_;
  Failure failure_;
};

std::vector<std::string> steps(StepGraph& graph, Log& log, int n) {
  for (int k = 0; k < n; ++k) graph.run([&log] { ++log.body_runs; });
  return log.calls;
}

using V = std::vector<std::string>;

// One capture for the whole run (the trainer's epochs share the graph): every later step replays it.
TEST(StepGraph, WarmsUpCapturesOnceThenReplays) {
  Log log;
  StepGraph graph(std::make_unique<RecordingCapture>(log, RecordingCapture::Failure::kNone), 2);
  EXPECT_EQ(steps(graph, log, 5), (V{"eager", "eager", "capture", "replay", "replay", "replay"}));
  EXPECT_EQ(log.body_runs, 2);  // the others replayed
  log.calls.clear();
  EXPECT_EQ(steps(graph, log, 3), (V{"replay", "replay", "replay"}));
  EXPECT_FALSE(graph.failed());
  EXPECT_EQ(graph.failure(), "");
}

TEST(StepGraph, AFailedCaptureRunsThatStepAndEveryLaterOneEagerly) {
  Log log;
  StepGraph graph(std::make_unique<RecordingCapture>(log, RecordingCapture::Failure::kClean), 1);
  EXPECT_EQ(steps(graph, log, 4), (V{"eager", "capture"}));
  EXPECT_EQ(log.body_runs, 4);  // no step lost: the failed capture's step ran, and the later ones
  EXPECT_TRUE(graph.failed());
  EXPECT_NE(graph.failure().find("stream is capturing"), std::string::npos) << graph.failure();
}

TEST(StepGraph, ACaptureLeftOpenStopsTrainingWithAMessage) {
  Log log;
  StepGraph graph(std::make_unique<RecordingCapture>(log, RecordingCapture::Failure::kLeftOpen), 1);
  graph.run([] {});
  try {
    graph.run([] {});
    FAIL() << "a capture left open was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kSoftware);
    EXPECT_NE(std::string(e.what()).find("run without --cuda-graph"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("capture invalidated"), std::string::npos) << e.what();
  }
}

// NCCL: every rank captures its collectives, or none does. Each rank asks the others once, at its capture.
TEST(StepGraph, SeveralRanksKeepTheirGraphsOnlyWhenEveryRankCaptured) {
  for (const bool others_captured : {true, false}) {
    for (const auto failure : {RecordingCapture::Failure::kNone, RecordingCapture::Failure::kClean}) {
      Log log;
      std::vector<bool> asked;
      StepGraph graph(std::make_unique<RecordingCapture>(log, failure), 1, [&](bool captured) {
        asked.push_back(captured);
        return captured && others_captured;
      });
      steps(graph, log, 4);
      const bool here = failure == RecordingCapture::Failure::kNone;
      SCOPED_TRACE(std::string("this rank captured ") + (here ? "yes" : "no") + ", the others " +
                   (others_captured ? "yes" : "no"));
      EXPECT_EQ(asked, std::vector<bool>{here});
      if (here && others_captured) {
        EXPECT_EQ(log.calls, (V{"eager", "capture", "replay", "replay", "replay"}));
        EXPECT_FALSE(graph.failed());
      } else {
        // A graph this rank captured is dropped: its collectives would wait for ranks that run eagerly.
        const V expected = here ? V{"eager", "capture", "drop"} : V{"eager", "capture"};
        EXPECT_EQ(log.calls, expected);
        EXPECT_EQ(log.body_runs, 4);
        EXPECT_TRUE(graph.failed());
        if (here) {
          EXPECT_EQ(graph.failure(), "another rank could not capture its step");
        }
      }
    }
  }
}

TEST(StepGraph, RefusesNoWarmUpNoCaptureAndACpuDevice) {
  Log log;
  EXPECT_THROW(StepGraph(std::make_unique<RecordingCapture>(log, RecordingCapture::Failure::kNone), 0),
               std::invalid_argument);
  EXPECT_THROW(StepGraph(std::unique_ptr<GraphCapture>(), 3), std::invalid_argument);
  EXPECT_THROW(StepGraph(torch::Device(torch::kCPU)), ConfigError);
}

}  // namespace
}  // namespace pcdino::train
