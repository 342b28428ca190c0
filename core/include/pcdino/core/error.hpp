// Errors and exit codes shared by every pcdino program.
//
// Exit codes follow BSD sysexits(3), which Slurm users see in `scontrol show job` / `sacct` as ExitCode:
// a job script can tell "bad configuration" (78) from "bad input data" (65) from "requeue me" (75).
#pragma once

#include <stdexcept>
#include <string>

namespace pcdino {

/// Process exit codes of all pcdino programs (values from <sysexits.h>).
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,       ///< an error not covered below
  kUsage = 64,        ///< EX_USAGE: bad command line (unknown option, missing argument)
  kDataError = 65,    ///< EX_DATAERR: input data is malformed (corrupt TIFF, bad checkpoint)
  kNoInput = 66,      ///< EX_NOINPUT: an input file or directory does not exist or cannot be read
  kUnavailable = 69,  ///< EX_UNAVAILABLE: the feature is not built into this binary
  kSoftware = 70,     ///< EX_SOFTWARE: internal error (a bug)
  kCantCreate = 73,   ///< EX_CANTCREAT: an output file cannot be created
  kIoError = 74,      ///< EX_IOERR: reading or writing failed part way
  kTempFail = 75,     ///< EX_TEMPFAIL: stopped on a signal after checkpointing; requeue to resume
  kConfig = 78,       ///< EX_CONFIG: the pipeline YAML or a flag has an invalid value
};

/// Returns the integer value of `code`, for `return` from main().
constexpr int to_int(ExitCode code) noexcept {
  return static_cast<int>(code);
}

/// Short name of an exit code ("config", "data", ...), used in log lines and `pcdino status`.
const char* exit_code_name(ExitCode code) noexcept;

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
