#include "pcdino/core/launch_env.hpp"

#include <cstdlib>

#include "pcdino/core/error.hpp"

namespace pcdino {

namespace {

struct Reader {
  const std::function<const char*(const char*)>& getenv;

  bool has(const char* name) const {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0';
  }

  int number(const char* name, int fallback) const {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const long parsed = std::strtol(v, &end, 10);
    // SLURM_STEP_TASKS_PER_NODE looks like "2(x3),1": its first count is this node's when uniform.
    if (end == v || parsed < 0 || (*end != '\0' && *end != '(' && *end != ',')) {
      throw ConfigError(std::string("environment variable ") + name + "='" + v + "' is not a count");
    }
    return static_cast<int>(parsed);
  }
};

}  // namespace

LaunchEnv read_launch_env(const std::function<const char*(const char*)>& getenv) {
  const Reader r{getenv};
  LaunchEnv env;
  if (r.has("OMPI_COMM_WORLD_RANK")) {
    env.launcher = "openmpi";
    env.rank = r.number("OMPI_COMM_WORLD_RANK", 0);
    env.size = r.number("OMPI_COMM_WORLD_SIZE", 1);
    env.local_rank = r.number("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    env.local_size = r.number("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (r.has("SLURM_STEP_ID") && r.has("SLURM_PROCID")) {
    env.launcher = "slurm";
    env.rank = r.number("SLURM_PROCID", 0);
    env.size = r.number("SLURM_STEP_NUM_TASKS", r.number("SLURM_NTASKS", 1));
    env.local_rank = r.number("SLURM_LOCALID", 0);
    env.local_size = r.number("SLURM_STEP_TASKS_PER_NODE", 1);
  } else if (r.has("RANK") && r.has("WORLD_SIZE")) {
    env.launcher = "torchrun";
    env.rank = r.number("RANK", 0);
    env.size = r.number("WORLD_SIZE", 1);
    env.local_rank = r.number("LOCAL_RANK", 0);
    env.local_size = r.number("LOCAL_WORLD_SIZE", 1);
    if (const char* addr = getenv("MASTER_ADDR")) env.master_addr = addr;
    env.master_port = r.number("MASTER_PORT", 0);
  }
  if (env.size < 1 || env.rank >= env.size || env.local_size < 1 || env.local_rank >= env.local_size) {
    throw ConfigError("inconsistent " + env.launcher + " environment: rank " + std::to_string(env.rank) +
                      " of " + std::to_string(env.size) + ", local rank " + std::to_string(env.local_rank) +
                      " of " + std::to_string(env.local_size));
  }
  return env;
}

LaunchEnv launch_env() {
  return read_launch_env([](const char* name) { return std::getenv(name); });
}

}  // namespace pcdino
