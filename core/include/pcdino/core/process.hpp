// Running another program and collecting what it printed: the Slurm commands (sbatch, scontrol, scancel)
// that `pcdino submit` and friends drive.
#pragma once

#include <string>
#include <vector>

namespace pcdino {

struct ProcessResult {
  int exit_code = 0;       ///< the program's exit status; 128 + N if signal N ended it
  std::string out;         ///< everything it wrote to stdout
  std::string err;         ///< everything it wrote to stderr
  bool timed_out = false;  ///< killed (SIGKILL) at the time limit; exit_code is then 137
};

/// Runs `argv[0]` (searched in PATH) with `argv`, stdin from /dev/null, and waits for it: at most
/// `timeout_seconds` when it is above 0 (then the program gets SIGKILL and `timed_out` is set: a probe of a
/// hung device or filesystem must end). Throws Error(kUnavailable) naming the program and `hint` (e.g.
/// "Slurm's client commands") when it cannot be started; any exit status is returned, not thrown.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& hint = "",
                          double timeout_seconds = 0);

/// `text` quoted for a POSIX shell ('...' with embedded quotes escaped), unquoted when it is made only of
/// characters that need none.
std::string shell_quote(const std::string& text);

/// `words` as one POSIX shell command line: each shell_quote()d, separated by spaces.
std::string shell_command(const std::vector<std::string>& words);

}  // namespace pcdino
