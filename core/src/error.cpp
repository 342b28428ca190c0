#include "pcdino/core/error.hpp"

namespace pcdino {

const char* exit_code_name(ExitCode code) noexcept {
  switch (code) {
    case ExitCode::kOk:
      return "ok";
    case ExitCode::kFailure:
      return "failure";
    case ExitCode::kUsage:
      return "usage";
    case ExitCode::kDataError:
      return "data";
    case ExitCode::kNoInput:
      return "no-input";
    case ExitCode::kUnavailable:
      return "unavailable";
    case ExitCode::kSoftware:
      return "internal";
    case ExitCode::kCantCreate:
      return "cant-create";
    case ExitCode::kIoError:
      return "io";
    case ExitCode::kTempFail:
      return "requeue";
    case ExitCode::kConfig:
      return "config";
  }
  return "unknown";
}

}  // namespace pcdino
