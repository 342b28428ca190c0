#include "pcdino/core/error.hpp"

namespace pcdino {

const std::vector<ExitCodeInfo>& exit_codes() {
  // code, name, sysexits name, meaning. A new use of a code must fit its meaning here, or get a row.
  static const std::vector<ExitCodeInfo> table = {
      {ExitCode::kOk, "ok", "", "success"},
      {ExitCode::kFailure, "failure", "",
       "an error not covered below: a stage of the run failed (`pcdino status`), a node check that drains "
       "the node, a health check that found an unhealthy node"},
      {ExitCode::kUsage, "usage", "EX_USAGE",
       "bad command line: an unknown subcommand or option, a missing argument"},
      {ExitCode::kDataError, "data", "EX_DATAERR",
       "input data is malformed: a corrupt TIFF, an inconsistent dataset, checkpoint or HDF5 file"},
      {ExitCode::kNoInput, "no-input", "EX_NOINPUT",
       "an input file or folder does not exist or cannot be read (a pipeline never submitted, for `status`)"},
      {ExitCode::kUnavailable, "unavailable", "EX_UNAVAILABLE",
       "something this needs is not here: a program (sbatch, srun, gnuplot, pcdino-train), a feature not "
       "built in (CUDA, NCCL), a device or driver that cannot be used, or a program of another release than "
       "the one needed (`pcluster` in commands.sh)"},
      {ExitCode::kSoftware, "internal", "EX_SOFTWARE",
       "internal error: a bug, or a Slurm command refusing what pcdino gave it (sbatch, scancel)"},
      {ExitCode::kCantCreate, "cant-create", "EX_CANTCREAT", "an output file or folder cannot be created"},
      {ExitCode::kIoError, "io", "EX_IOERR",
       "reading or writing failed part way; from a training rank: its peers stopped answering (the "
       "watchdog)"},
      {ExitCode::kTempFail, "requeue", "EX_TEMPFAIL",
       "stopped on a signal after checkpointing: requeue to resume (for `submit`: jobs of the run are still "
       "queued or running)"},
      {ExitCode::kConfig, "config", "EX_CONFIG",
       "an invalid value in the pipeline YAML, a site or image spec, or a flag; a cluster configuration with "
       "errors (or policy findings under --strict)"},
      {ExitCode::kRestartsSpent, "restarts-spent", "",
       "a stage's batch script gave up: its job started again after more faults than slurm.max_restarts "
       "(`pcdino status` lists each restart and why)"},
  };
  return table;
}

const char* exit_code_name(ExitCode code) noexcept {
  for (const auto& row : exit_codes())
    if (row.code == code) return row.name;
  return "unknown";
}

std::string exit_codes_markdown() {
  std::string out = "| code | name | sysexits(3) | meaning |\n|---|---|---|---|\n";
  for (const auto& row : exit_codes()) {
    const std::string sysexits = *row.sysexits != '\0' ? std::string("`") + row.sysexits + "`" : "";
    out += "| " + std::to_string(to_int(row.code)) + " | `" + row.name + "` | " + sysexits + " | " +
           row.meaning + " |\n";
  }
  return out;
}

std::string exit_codes_line() {
  std::string out = "Exit codes:";
  for (const auto& row : exit_codes())
    out += std::string(out.back() == ':' ? " " : ", ") + std::to_string(to_int(row.code)) + " " + row.name;
  return out + ".";
}

}  // namespace pcdino
