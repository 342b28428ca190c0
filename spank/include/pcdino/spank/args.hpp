// Arguments of spank_pcdino.so: the admin's, from its plugstack.conf line
//   required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pcdino.so config=/etc/slurm/accel-profiles.yaml
//            default=nvidia-efa master_port_range=29500-29999 manifest=/opt/pcdino/manifest.json
// (one line in the file)
// and the users', from --accel-profile=NAME and --accel-device-bind=MODE.
#pragma once

#include <string>
#include <vector>

#include "pcdino/spank/environment.hpp"

namespace pcdino::spank {

struct PluginArgs {
  std::string config;                                  ///< profile file (required)
  std::string default_profile = "none";                ///< for jobs without --accel-profile
  PortRange ports;                                     ///< MASTER_PORT range
  std::string manifest = "/opt/pcdino/manifest.json";  ///< component versions written by `pcdino ami`
};

/// Parses plugstack.conf's arguments. Throws std::invalid_argument naming an unknown, repeated or
/// malformed argument, a relative path, or a missing config=.
PluginArgs parse_plugin_args(const std::vector<std::string>& args);

/// --accel-device-bind values.
enum class BindMode { kNone, kPerTask };

/// Validates --accel-profile's value: a profile name or "none". Throws std::invalid_argument with the
/// message users see at submission.
std::string parse_profile_option(const char* value);

/// Validates --accel-device-bind's value ("none" or "per-task"; empty means per-task). Throws
/// std::invalid_argument with the message users see at submission.
///
/// The bare option (no value) reaches an srun inside the job as the text "(null)", which is read as
/// per-task too: sbatch and salloc copy each SPANK option into the job's environment as
/// SLURM_SPANK__SLURM_SPANK_OPTION_<plugin>_<option>, printing a missing value as "(null)", and srun runs
/// the option callback again on that value (Slurm 22.05 src/common/plugstack.c and 25.11
/// src/common/spank.c: _option_setenv, spank_process_env_options). Refusing it failed every srun of such
/// a job.
BindMode parse_bind_option(const char* value);

}  // namespace pcdino::spank
