#include <gtest/gtest.h>

#include <set>
#include <string>

#include "pcdino/core/error.hpp"

namespace pcdino {
namespace {

TEST(ExitCode, ValuesAreSysexits) {
  // Slurm users read these in `scontrol show job`; they must keep their sysexits(3) meaning.
  EXPECT_EQ(to_int(ExitCode::kUsage), 64);
  EXPECT_EQ(to_int(ExitCode::kDataError), 65);
  EXPECT_EQ(to_int(ExitCode::kNoInput), 66);
  EXPECT_EQ(to_int(ExitCode::kUnavailable), 69);
  EXPECT_EQ(to_int(ExitCode::kTempFail), 75);
  EXPECT_EQ(to_int(ExitCode::kConfig), 78);
}

TEST(ExitCode, NamesAreDistinct) {
  const ExitCode all[] = {ExitCode::kOk,        ExitCode::kFailure,    ExitCode::kUsage,
                          ExitCode::kDataError, ExitCode::kNoInput,    ExitCode::kUnavailable,
                          ExitCode::kSoftware,  ExitCode::kCantCreate, ExitCode::kIoError,
                          ExitCode::kTempFail,  ExitCode::kConfig};
  std::set<std::string> names;
  for (ExitCode code : all) {
    const std::string name = exit_code_name(code);
    EXPECT_NE(name, "unknown") << to_int(code);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size(all));
}

TEST(Error, CarriesMessageAndCode) {
  try {
    throw ConfigError("pipeline.yaml:12:3: train_scDINO.epochs: expected a positive integer, got 'ten'");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kConfig);
    EXPECT_NE(std::string(e.what()).find("pipeline.yaml:12:3"), std::string::npos);
  }
  EXPECT_EQ(DataError("x").code(), ExitCode::kDataError);
  EXPECT_EQ(NoInputError("x").code(), ExitCode::kNoInput);
  EXPECT_EQ(CantCreateError("x").code(), ExitCode::kCantCreate);
}

}  // namespace
}  // namespace pcdino
