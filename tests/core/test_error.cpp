#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_EQ(to_int(ExitCode::kRestartsSpent), 79) << "past sysexits' last code (78): pcdino's own";
}

TEST(ExitCode, OneRowPerCodeWithDistinctNamesAndAMeaning) {
  const ExitCode all[] = {ExitCode::kOk,        ExitCode::kFailure,    ExitCode::kUsage,
                          ExitCode::kDataError, ExitCode::kNoInput,    ExitCode::kUnavailable,
                          ExitCode::kSoftware,  ExitCode::kCantCreate, ExitCode::kIoError,
                          ExitCode::kTempFail,  ExitCode::kConfig,     ExitCode::kRestartsSpent};
  ASSERT_EQ(exit_codes().size(), std::size(all)) << "every enumerator has its row";
  std::set<std::string> names;
  int previous = -1;
  for (const auto& row : exit_codes()) {
    EXPECT_GT(to_int(row.code), previous) << "in numerical order";
    previous = to_int(row.code);
    EXPECT_NE(std::string(row.meaning), "") << row.name;
    // A sysexits name for exactly the codes in sysexits' range (64 to 78).
    const bool sysexits_range = to_int(row.code) >= 64 && to_int(row.code) <= 78;
    EXPECT_EQ(*row.sysexits != '\0', sysexits_range) << row.name;
    names.insert(row.name);
  }
  EXPECT_EQ(names.size(), std::size(all));
  for (ExitCode code : all) EXPECT_NE(std::string(exit_code_name(code)), "unknown") << to_int(code);
  EXPECT_STREQ(exit_code_name(static_cast<ExitCode>(2)), "unknown");
}

TEST(ExitCode, HelpLineAndMarkdownComeFromTheTable) {
  const std::string line = exit_codes_line();
  EXPECT_EQ(line.rfind("Exit codes: 0 ok, 1 failure, 64 usage, ", 0), 0u) << line;
  EXPECT_NE(line.find(", 78 config, 79 restarts-spent."), std::string::npos) << line;
  const std::string md = exit_codes_markdown();
  EXPECT_EQ(md.rfind("| code | name | sysexits(3) | meaning |\n|---|---|---|---|\n", 0), 0u);
  EXPECT_NE(md.find("| 69 | `unavailable` | `EX_UNAVAILABLE` | something this needs is not here"),
            std::string::npos)
      << md;
  EXPECT_EQ(static_cast<std::size_t>(std::count(md.begin(), md.end(), '\n')), exit_codes().size() + 2);
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
