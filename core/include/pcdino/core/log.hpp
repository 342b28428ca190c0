// Logging for pcdino programs: spdlog with the MPI rank in every line, so that the merged output of
// `srun` over many nodes can be read rank by rank.
#pragma once

#include <string>

namespace pcdino {

/// Log levels accepted by --log-level and PCDINO_LOG_LEVEL.
/// Throws ConfigError naming the value if `level` is not one of trace, debug, info, warn, error, off.
void set_log_level(const std::string& level);

/// Configures the default spdlog logger to write to stderr with the pattern
/// `[2026-11-22 17:16:49.123] [rank 3/8] [info] message`. `rank` and `world_size` come from the launcher
/// (pass 0 and 1 for a single process). The level comes from PCDINO_LOG_LEVEL if set, else "info".
/// Safe to call more than once (the last call wins).
void init_logging(int rank, int world_size);

}  // namespace pcdino
