// Errors and exit codes shared by every pcdino program.
//
// Exit codes follow BSD sysexits(3), which Slurm users see in `scontrol show job` / `sacct` as ExitCode:
// a job script can tell "bad configuration" (78) from "bad input data" (65) from "requeue me" (75). Each code
// has one meaning, written once in exit_codes() (core/src/error.cpp): `pcdino --help`, `pcdino exit-codes`
// and the table in docs/pipeline.md are printed from it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace pcdino {

/// Process exit codes of all pcdino programs and of the batch scripts they write (values from
/// <sysexits.h>, and one of pcdino's own where none fits). Their meanings: exit_codes().
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,
  kUsage = 64,          ///< EX_USAGE
  kDataError = 65,      ///< EX_DATAERR
  kNoInput = 66,        ///< EX_NOINPUT
  kUnavailable = 69,    ///< EX_UNAVAILABLE
  kSoftware = 70,       ///< EX_SOFTWARE
  kCantCreate = 73,     ///< EX_CANTCREAT
  kIoError = 74,        ///< EX_IOERR
  kTempFail = 75,       ///< EX_TEMPFAIL
  kConfig = 78,         ///< EX_CONFIG
  kRestartsSpent = 79,  ///< pcdino's: no sysexits code means "gave up after repeated faults"
};

/// Returns the integer value of `code`, for `return` from main().
constexpr int to_int(ExitCode code) noexcept {
  return static_cast<int>(code);
}

/// One exit code: its value, names and meaning.
struct ExitCodeInfo {
  ExitCode code;
  const char* name;      ///< short name ("config"), in log lines and `pcdino status`
  const char* sysexits;  ///< its <sysexits.h> name ("EX_CONFIG"); "" for 0, 1 and pcdino's own
  const char* meaning;   ///< what it means, with the commands that end with it where that helps
};

/// Every exit code, in numerical order: the one table of their meanings.
const std::vector<ExitCodeInfo>& exit_codes();

/// Short name of an exit code ("config", "data", ...), used in log lines and `pcdino status`; "unknown"
/// for a value outside exit_codes().
const char* exit_code_name(ExitCode code) noexcept;

/// The table as Markdown (code, name, sysexits, meaning): what `pcdino exit-codes` prints.
std::string exit_codes_markdown();

/// The table in one line for --help footers: "Exit codes: 0 ok, 1 failure, 64 usage, ..." ending ".".
std::string exit_codes_line();

/// The exception every pcdino library throws for a condition the user can act on. `what()` is the full
/// message, written to name the file, key (with YAML line and column) or rank involved; `code()` is the
/// exit code a program should end with if the error reaches main().
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// Error in configuration (pipeline YAML or flags): exit code 78.
struct ConfigError : Error {
  explicit ConfigError(const std::string& message) : Error(ExitCode::kConfig, message) {}
};

/// Error in input data (a corrupt image, an inconsistent file): exit code 65.
struct DataError : Error {
  explicit DataError(const std::string& message) : Error(ExitCode::kDataError, message) {}
};

/// A missing or unreadable input path: exit code 66.
struct NoInputError : Error {
  explicit NoInputError(const std::string& message) : Error(ExitCode::kNoInput, message) {}
};

/// An output that cannot be created or written: exit code 73.
struct CantCreateError : Error {
  explicit CantCreateError(const std::string& message) : Error(ExitCode::kCantCreate, message) {}
};

}  // namespace pcdino
