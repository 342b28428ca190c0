#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "pcdino/core/error.hpp"
#include "pcdino/core/log.hpp"

namespace pcdino {
namespace {

TEST(Log, AcceptsKnownLevels) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_NO_THROW(set_log_level(level)) << level;
  }
  set_log_level("debug");
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
}

TEST(Log, RejectsUnknownLevelNamingIt) {
  try {
    set_log_level("verbose");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'verbose'"), std::string::npos);
  }
}

TEST(Log, InitReadsLevelFromEnvironment) {
  setenv("PCDINO_LOG_LEVEL", "warn", 1);
  init_logging(3, 8);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  unsetenv("PCDINO_LOG_LEVEL");
  init_logging(0, 1);
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST(Log, RankAppearsInEveryLine) {
  init_logging(3, 8);
  testing::internal::CaptureStderr();
  spdlog::info("hello");
  spdlog::default_logger()->flush();
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[rank 3/8] [info] hello"), std::string::npos) << out;
}

}  // namespace
}  // namespace pcdino
