#include "pcdino/core/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "pcdino/core/error.hpp"

namespace pcdino {

void set_log_level(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str maps anything it does not know to "off"; only accept "off" when it was asked for.
  if (parsed == spdlog::level::off && level != "off") {
    throw ConfigError("invalid log level '" + level + "': expected trace, debug, info, warn, error or off");
  }
  spdlog::set_level(parsed);
}

void init_logging(int rank, int world_size) {
  // stderr, unbuffered per line, so Slurm's %j.err files interleave sensibly across ranks.
  // Not through spdlog's factory: it refuses a second logger of the same name, and this may run twice.
  auto logger = std::make_shared<spdlog::logger>("pcdino", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "/" +
                      std::to_string(world_size) + "] [%l] %v");
  const char* env_level = std::getenv("PCDINO_LOG_LEVEL");
  set_log_level(env_level != nullptr && *env_level != '\0' ? env_level : "info");
}

}  // namespace pcdino
